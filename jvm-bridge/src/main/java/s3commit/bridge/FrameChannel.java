package s3commit.bridge;

import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.ByteChannel;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One end of a connection to the sidecar, speaking its framing ({@code s3commit/bridge/protocol.py}).
 *
 * <pre>
 *   header frame   u32 length N (1 .. FRAME_LIMIT), N bytes of UTF-8 JSON
 *   body           only if the header says "body": true: data frames (u32 length, bytes), then
 *                  u32 0 (complete) or u32 0xFFFFFFFF followed by an error header frame (cut short)
 * </pre>
 *
 * <p>No frame is larger than {@link #FRAME_LIMIT}: a header over it is refused before anything is sent, and a
 * frame over it from the peer is refused. Data goes straight between the caller's buffers and the socket:
 * a direct buffer costs no copy in the JVM, a heap buffer one (NIO's).
 */
public final class FrameChannel {
  public static final int FRAME_LIMIT = 16 * 1024 * 1024;
  public static final int CHUNK = 4 * 1024 * 1024;
  private static final int END = 0;
  private static final int ABORT = 0xFFFFFFFF;
  public static final ObjectMapper JSON = new ObjectMapper();

  private final ByteChannel channel;
  private final ByteBuffer in = ByteBuffer.allocateDirect(64 * 1024);
  private final ByteBuffer lengthOut = ByteBuffer.allocateDirect(4);

  /** A frame over the limit, sent or received. */
  public static final class FrameTooLargeException extends IOException {
    private static final long serialVersionUID = 1L;

    FrameTooLargeException(String message) {
      super(message);
    }
  }

  public FrameChannel(ByteChannel channel) {
    this.channel = channel;
    in.flip();  // empty, ready for reading
  }

  // --- writing ------------------------------------------------------------------------------------

  /** Encode a header, refusing one over the frame limit before anything is sent. */
  static byte[] encode(Map<String, Object> header) throws IOException {
    byte[] body = JSON.writeValueAsBytes(header);
    if (body.length > FRAME_LIMIT) {
      throw new FrameTooLargeException("the header of " + header.getOrDefault("op", "a message") + " is "
          + body.length + " bytes, over the s3commit bridge's frame limit of " + FRAME_LIMIT + " bytes");
    }
    return body;
  }

  public void writeHeader(Map<String, Object> header) throws IOException {
    byte[] body = encode(header);
    ByteBuffer frame = ByteBuffer.allocate(4 + body.length);
    frame.putInt(body.length).put(body).flip();
    writeFully(frame);
  }

  /** A header announcing a body; follow with {@link #writeData} calls and {@link #endBody}. */
  public void writeBodyHeader(Map<String, Object> header) throws IOException {
    Map<String, Object> withBody = new LinkedHashMap<>(header);
    withBody.put("body", true);
    writeHeader(withBody);
  }

  /** Send the remaining bytes of {@code data} as data frames of at most {@link #CHUNK} bytes. */
  public void writeData(ByteBuffer data) throws IOException {
    while (data.hasRemaining()) {
      int n = Math.min(data.remaining(), CHUNK);
      ByteBuffer slice = data.slice();
      slice.limit(n);
      lengthOut.clear();
      lengthOut.putInt(n).flip();
      ByteBuffer[] frame = {lengthOut, slice};
      while (lengthOut.hasRemaining() || slice.hasRemaining()) {
        if (channel instanceof java.nio.channels.GatheringByteChannel) {
          ((java.nio.channels.GatheringByteChannel) channel).write(frame);
        } else {
          writeFully(lengthOut);
          writeFully(slice);
        }
      }
      data.position(data.position() + n);
    }
  }

  public void endBody() throws IOException {
    ByteBuffer end = ByteBuffer.allocate(4);
    end.putInt(END).flip();
    writeFully(end);
  }

  /** An output stream of data frames (for bodies produced piece by piece); {@code close} ends the body. */
  public OutputStream bodyStream() {
    return new OutputStream() {
      private final ByteBuffer buffer = ByteBuffer.allocate(64 * 1024);
      private boolean closed;

      @Override
      public void write(int b) throws IOException {
        write(new byte[] {(byte) b}, 0, 1);
      }

      @Override
      public void write(byte[] b, int off, int len) throws IOException {
        while (len > 0) {
          int n = Math.min(len, buffer.remaining());
          buffer.put(b, off, n);
          off += n;
          len -= n;
          if (!buffer.hasRemaining()) {
            flush();
          }
        }
      }

      @Override
      public void flush() throws IOException {
        buffer.flip();
        writeData(buffer);
        buffer.clear();
      }

      @Override
      public void close() throws IOException {
        if (!closed) {
          closed = true;
          flush();
          endBody();
        }
      }
    };
  }

  private void writeFully(ByteBuffer buffer) throws IOException {
    while (buffer.hasRemaining()) {
      channel.write(buffer);
    }
  }

  // --- reading ------------------------------------------------------------------------------------

  private void fill(int atLeast) throws IOException {
    if (in.remaining() >= atLeast) {
      return;
    }
    in.compact();
    try {
      while (in.position() < atLeast) {
        if (channel.read(in) < 0) {
          throw new EOFException("the sidecar closed the connection");
        }
      }
    } finally {
      in.flip();
    }
  }

  int readLength() throws IOException {
    fill(4);
    return in.getInt();
  }

  /** The next header frame, as a map. */
  @SuppressWarnings("unchecked")
  public Map<String, Object> readHeader() throws IOException {
    int length = readLength();
    if (length <= 0 || length > FRAME_LIMIT) {
      throw new FrameTooLargeException("the sidecar sent a header frame of " + Integer.toUnsignedString(length)
          + " bytes; the s3commit bridge's frame limit is " + FRAME_LIMIT + " bytes");
    }
    byte[] body = new byte[length];
    readRaw(ByteBuffer.wrap(body));
    return JSON.readValue(body, Map.class);
  }

  /** Fill {@code dst} completely: first from what is buffered, then straight from the socket. */
  void readRaw(ByteBuffer dst) throws IOException {
    if (in.hasRemaining()) {
      int n = Math.min(in.remaining(), dst.remaining());
      ByteBuffer part = in.slice();
      part.limit(n);
      dst.put(part);
      in.position(in.position() + n);
    }
    while (dst.hasRemaining()) {
      if (dst.remaining() < 4096) {
        fill(Math.min(dst.remaining(), in.capacity()));
        int n = Math.min(in.remaining(), dst.remaining());
        ByteBuffer part = in.slice();
        part.limit(n);
        dst.put(part);
        in.position(in.position() + n);
      } else if (channel.read(dst) < 0) {
        throw new EOFException("the sidecar closed the connection mid-message");
      }
    }
  }

  /** A body being received. Read it all (or {@link #drain} it) before the next message. */
  public final class Body extends InputStream {
    private final ErrorMapper errors;
    private int left;
    private boolean done;

    Body(ErrorMapper errors) {
      this.errors = errors;
    }

    private boolean nextFrame() throws IOException {
      if (done) {
        return false;
      }
      int length = readLength();
      if (length == END) {
        done = true;
        return false;
      }
      if (length == ABORT) {
        done = true;
        throw errors.map(readHeader());
      }
      if (length < 0 || length > FRAME_LIMIT) {
        throw new FrameTooLargeException("the sidecar sent a data frame of " + Integer.toUnsignedString(length)
            + " bytes; the s3commit bridge's frame limit is " + FRAME_LIMIT + " bytes");
      }
      left = length;
      return true;
    }

    /** Read up to {@code dst.remaining()} bytes; -1 at the end of the body. */
    public int read(ByteBuffer dst) throws IOException {
      if (!dst.hasRemaining()) {
        return 0;
      }
      while (left == 0) {
        if (!nextFrame()) {
          return -1;
        }
      }
      int n = Math.min(left, dst.remaining());
      ByteBuffer window = dst.duplicate();
      window.limit(window.position() + n);
      readRaw(window);
      dst.position(dst.position() + n);
      left -= n;
      return n;
    }

    /** Fill {@code dst}; an EOFException if the body ends first. */
    public void readFully(ByteBuffer dst) throws IOException {
      while (dst.hasRemaining()) {
        if (read(dst) < 0) {
          throw new EOFException("the sidecar's answer ended " + dst.remaining() + " bytes early");
        }
      }
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      return read(ByteBuffer.wrap(b, off, len));
    }

    @Override
    public int read() throws IOException {
      byte[] one = new byte[1];
      return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
    }

    public boolean isDone() {
      return done;
    }

    /** Skip whatever is left. */
    public void drain() throws IOException {
      ByteBuffer sink = ByteBuffer.allocate(64 * 1024);
      while (read(sink) >= 0) {
        sink.clear();
      }
    }
  }

  /** Maps an error header (from a body cut short) to the exception to throw. */
  public interface ErrorMapper {
    IOException map(Map<String, Object> header);
  }

  public Body body(ErrorMapper errors) {
    return new Body(errors);
  }

  /** Close the connection (quietly: it may already be broken). */
  public void close() {
    try {
      channel.close();
    } catch (IOException e) {
      // already broken
    }
  }
}

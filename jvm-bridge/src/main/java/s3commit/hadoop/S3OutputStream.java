package s3commit.hadoop;

import org.apache.hadoop.fs.Abortable;
import org.apache.hadoop.fs.StreamCapabilities;

import s3commit.bridge.Sidecar;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * An output stream that cuts its bytes into parts and hands each finished part to a writer in the sidecar,
 * which uploads it in the background (S3A's block output stream, with the upload done by the sidecar).
 *
 * <p>A part is {@code fs.s3a.multipart.size} bytes (as the sidecar parsed it). With
 * {@code fs.s3a.fast.upload.buffer=disk} (the default) a part is written to a block file in the sidecar's
 * private block directory and handed over by name: the JVM holds one 1 MiB staging buffer per open stream,
 * and the sidecar reads the file when the part's upload starts and deletes it when the upload ends. With
 * {@code array} (or {@code bytebuffer}) the part is kept on the heap and sent as the request's body. The
 * hand-over returns once the part is queued; it blocks only while {@code fs.s3a.fast.upload.active.blocks}
 * parts of this file are queued or uploading. A part smaller than the staging buffer (the last part of most
 * small files) is always sent as a body, with no file.
 *
 * <p>{@link #close} sends the last part and waits for all of them: it completes the upload (a plain path) or
 * records it as pending (a magic path). {@link #abort} (and a close after a failure) aborts the upload and
 * deletes this stream's unsent block file. The stream is tied to the sidecar that opened it: if that sidecar
 * dies, the next call fails ({@link Sidecar.SidecarDiedException}) and the write must be started again.
 */
class S3OutputStream extends OutputStream implements Abortable, StreamCapabilities {
  static final int STAGING = 1024 * 1024;
  private static final ConcurrentLinkedQueue<ByteBuffer> STAGING_POOL = new ConcurrentLinkedQueue<>();
  private static final int STAGING_POOL_LIMIT = 64;

  /** Where parts wait until they are handed over. */
  enum Buffer {
    DISK, ARRAY;

    static Buffer parse(String value) {
      String v = value == null ? "disk" : value.trim().toLowerCase(java.util.Locale.ROOT);
      switch (v) {
        case "":
        case "disk":
          return DISK;
        case "array":
        case "bytebuffer":
          return ARRAY;
        default:
          throw new IllegalArgumentException("fs.s3a.fast.upload.buffer=" + value
              + " is not valid. Valid values are: disk, array, bytebuffer");
      }
    }
  }

  private final Sidecar sidecar;
  private final String location;
  private final long handle;
  private final boolean magic;
  private final long partSize;
  private final Buffer mode;
  private final Path blocksDir;
  private ByteBuffer stage;
  private final List<byte[]> heapChunks = new ArrayList<>();
  private FileChannel file;
  private Path filePath;
  private long blockBytes;
  private int parts;
  private long written;
  private boolean closed;
  private boolean failed;

  S3OutputStream(S3FileSystem fs, String location, Buffer mode, boolean ifNoneMatch) throws IOException {
    this.location = location;
    this.mode = mode;
    Map<String, Object> args = new HashMap<>();
    args.put("conf_id", fs.confId());
    args.put("path", location);
    if (ifNoneMatch) {
      args.put("if_none_match", true);
    }
    this.sidecar = Sidecar.get();
    Map<String, Object> opened = sidecar.request("fs.open_write", args, null, Sidecar::collect).header;
    this.handle = ((Number) opened.get("handle")).longValue();
    this.magic = Boolean.TRUE.equals(opened.get("magic"));
    this.partSize = ((Number) opened.get("part_size")).longValue();
    this.blocksDir = Path.of((String) opened.get("blocks_dir"));
    this.stage = takeStaging();
  }

  private static ByteBuffer takeStaging() {
    ByteBuffer buffer = STAGING_POOL.poll();
    return buffer != null ? buffer : ByteBuffer.allocateDirect(STAGING);
  }

  private static void returnStaging(ByteBuffer buffer) {
    if (buffer != null && buffer.isDirect() && STAGING_POOL.size() < STAGING_POOL_LIMIT) {
      buffer.clear();
      STAGING_POOL.offer(buffer);
    }
  }

  boolean isMagic() {
    return magic;
  }

  long written() {
    return written;
  }

  @Override
  public synchronized void write(int b) throws IOException {
    write(new byte[] {(byte) b}, 0, 1);
  }

  @Override
  public synchronized void write(byte[] b, int off, int len) throws IOException {
    if (closed) {
      throw new IOException("stream is closed: " + location);
    }
    java.util.Objects.checkFromIndexSize(off, len, b.length);
    while (len > 0) {
      if (blockBytes == partSize) {
        // A full part goes once a byte follows it; the last one goes with close(), which lets the sidecar cut
        // it into pieces that upload side by side (the file's tail is then not one part's upload time).
        handOver(false);
      }
      int n = (int) Math.min(Math.min(stage.remaining(), partSize - blockBytes), len);
      stage.put(b, off, n);
      blockBytes += n;
      written += n;
      off += n;
      len -= n;
      if (blockBytes < partSize && !stage.hasRemaining()) {
        spill();
      }
    }
  }

  /** The staging buffer is full and the part is not: move what it holds out of the way. */
  private void spill() throws IOException {
    stage.flip();
    try {
      if (mode == Buffer.DISK) {
        if (file == null) {
          filePath = blocksDir.resolve("h" + handle + "-p" + (parts + 1) + "-" + UUID.randomUUID() + ".block");
          file = FileChannel.open(filePath, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
          StreamCounters.BLOCK_FILES.incrementAndGet();
        }
        while (stage.hasRemaining()) {
          file.write(stage);
        }
      } else {
        byte[] chunk = new byte[stage.remaining()];
        stage.get(chunk);
        heapChunks.add(chunk);
      }
    } catch (IOException e) {
      failed = true;
      throw new IOException("could not buffer part " + (parts + 1) + " of " + location + " in " + blocksDir + ": "
          + e.getMessage(), e);
    } finally {
      stage.clear();
    }
  }

  /** Hand the current part to the sidecar: the next part (blocks at the in-flight bound) or the last one. */
  private void handOver(boolean last) throws IOException {
    Map<String, Object> args = new HashMap<>();
    args.put("handle", handle);
    Sidecar.RequestBody body = null;
    if (file != null) {
      spill();
      file.close();
      file = null;
      args.put("block", filePath.getFileName().toString());
      filePath = null;  // the sidecar's from now on: it deletes the file whatever happens
    } else {
      args.put("length", blockBytes);
      final List<byte[]> chunks = new ArrayList<>(heapChunks);
      final ByteBuffer tail = stage.duplicate().flip();
      body = channel -> {
        for (byte[] chunk : chunks) {
          channel.writeData(ByteBuffer.wrap(chunk));
        }
        channel.writeData(tail.duplicate());
        channel.endBody();
      };
    }
    parts++;
    StreamCounters.PARTS_HANDED_OVER.incrementAndGet();
    try {
      sidecar.exchange(last ? "fs.close_write" : "fs.write_block", args, body, Sidecar::collect);
    } catch (IOException e) {
      failed = true;
      throw e;
    } finally {
      heapChunks.clear();
      stage.clear();
      blockBytes = 0;
    }
  }

  @Override
  public synchronized void close() throws IOException {
    if (closed) {
      return;
    }
    if (failed) {
      abort();
      return;
    }
    closed = true;
    try {
      handOver(true);
    } catch (IOException e) {
      closed = false;
      abort();
      throw e;
    } finally {
      release();
    }
    if (magic) {
      S3FileSystem.recordMagicLength(location, written);
    }
  }

  /** Abandon the file: abort the upload and delete the unsent block file. Nothing becomes visible. */
  @Override
  public synchronized AbortableResult abort() {
    boolean wasClosed = closed;
    closed = true;
    IOException failure = null;
    if (!wasClosed) {
      Map<String, Object> args = new HashMap<>();
      args.put("handle", handle);
      try {
        Sidecar.uninterruptibly(() -> sidecar.exchange("fs.abort_write", args, null, Sidecar::collect));
      } catch (Sidecar.SidecarDiedException e) {
        // Its writer died with it; the upload is found and aborted by the task or job abort.
      } catch (IOException e) {
        failure = e;
      }
    }
    release();
    final IOException error = failure;
    return new AbortableResult() {
      @Override
      public boolean alreadyClosed() {
        return wasClosed;
      }

      @Override
      public IOException anyCleanupException() {
        return error;
      }
    };
  }

  private void release() {
    if (file != null) {
      try {
        file.close();
      } catch (IOException e) {
        // deleting it anyway
      }
      file = null;
    }
    if (filePath != null) {
      try {
        Files.deleteIfExists(filePath);
      } catch (IOException e) {
        // the next sidecar's sweep removes it
      }
      filePath = null;
    }
    heapChunks.clear();
    returnStaging(stage);
    stage = ByteBuffer.allocate(0);
  }

  @Override
  public boolean hasCapability(String capability) {
    return "fs.capability.outputstream.abortable".equalsIgnoreCase(capability);
  }

  @Override
  public void flush() {
    // Parts are handed over when full: S3 has no partial flush.
  }

  @Override
  public String toString() {
    return "S3OutputStream{" + location + ", handle=" + handle + ", parts=" + parts + ", written=" + written + "}";
  }
}

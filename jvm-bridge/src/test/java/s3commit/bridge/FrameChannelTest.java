package s3commit.bridge;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ByteChannel;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;

/** The framing as the JVM writes and reads it; error mapping; oversized frames refused on both sides. */
final class FrameChannelTest {
  /** An in-memory channel: what is written can be read back. */
  static final class Loop implements ByteChannel {
    final ByteBuffer data = ByteBuffer.allocate(64 * 1024 * 1024);
    int readPosition;

    @Override
    public int read(ByteBuffer dst) {
      int available = data.position() - readPosition;
      if (available == 0) {
        return -1;
      }
      int n = Math.min(available, dst.remaining());
      ByteBuffer view = data.duplicate();
      view.position(readPosition).limit(readPosition + n);
      dst.put(view);
      readPosition += n;
      return n;
    }

    @Override
    public int write(ByteBuffer src) {
      int n = src.remaining();
      data.put(src);
      return n;
    }

    @Override
    public boolean isOpen() {
      return true;
    }

    @Override
    public void close() {
    }
  }

  @Test
  void testAHeaderAndABodyRoundTrip() throws IOException {
    Loop loop = new Loop();
    FrameChannel channel = new FrameChannel(loop);
    Map<String, Object> header = new LinkedHashMap<>();
    header.put("op", "fs.write_block");
    header.put("handle", 7);
    channel.writeBodyHeader(header);
    byte[] part = new byte[FrameChannel.CHUNK * 2 + 3];
    Arrays.fill(part, (byte) 7);
    channel.writeData(ByteBuffer.wrap(part));
    channel.endBody();
    Map<String, Object> read = channel.readHeader();
    assertEquals("fs.write_block", read.get("op"), "op");
    assertEquals(Boolean.TRUE, read.get("body"), "body announced");
    FrameChannel.Body body = channel.body(Sidecar::toException);
    ByteBuffer target = ByteBuffer.allocate(part.length);
    body.readFully(target);
    assertTrue(Arrays.equals(part, target.array()), "the body arrives whole");
    assertEquals(-1, body.read(ByteBuffer.allocate(1)), "then the end");
  }

  @Test
  void testNoDataFrameIsLargerThanAChunk() throws IOException {
    Loop loop = new Loop();
    FrameChannel channel = new FrameChannel(loop);
    channel.writeData(ByteBuffer.allocate(FrameChannel.CHUNK * 3 + 1));
    ByteBuffer raw = loop.data.duplicate().flip();
    int frames = 0;
    while (raw.hasRemaining()) {
      int length = raw.getInt();
      assertTrue(length <= FrameChannel.CHUNK, "frame of " + length);
      raw.position(raw.position() + length);
      frames++;
    }
    assertEquals(4, frames, "frames");
  }

  @Test
  void testAnOversizedHeaderIsRefusedBeforeAnythingIsSent() {
    Loop loop = new Loop();
    FrameChannel channel = new FrameChannel(loop);
    Map<String, Object> header = new HashMap<>();
    header.put("op", "job.commit");
    char[] big = new char[FrameChannel.FRAME_LIMIT];
    Arrays.fill(big, 'x');
    header.put("messages", new String(big));
    FrameChannel.FrameTooLargeException e = assertThrows(FrameChannel.FrameTooLargeException.class,
        () -> channel.writeHeader(header), "too large");
    assertTrue(e.getMessage().contains("job.commit")
        && e.getMessage().contains(String.valueOf(FrameChannel.FRAME_LIMIT)), "names the op and the limit: "
        + e.getMessage());
    assertEquals(0, loop.data.position(), "nothing sent");
  }

  @Test
  void testAnOversizedFrameFromTheSidecarIsRefused() {
    Loop loop = new Loop();
    loop.data.putInt(FrameChannel.FRAME_LIMIT + 1);
    FrameChannel channel = new FrameChannel(loop);
    FrameChannel.FrameTooLargeException e = assertThrows(FrameChannel.FrameTooLargeException.class,
        channel::readHeader, "too large");
    assertTrue(e.getMessage().contains("frame limit"), e.getMessage());
  }

  @Test
  void testABodyCutShortRaisesTheSidecarsError() throws IOException {
    Loop loop = new Loop();
    FrameChannel channel = new FrameChannel(loop);
    channel.writeData(ByteBuffer.wrap("abc".getBytes(StandardCharsets.UTF_8)));
    loop.data.putInt(0xFFFFFFFF);
    Map<String, Object> error = new HashMap<>();
    error.put("type", "FileNotFound");
    error.put("message", "gone");
    Map<String, Object> header = new HashMap<>();
    header.put("ok", false);
    header.put("error", error);
    channel.writeHeader(header);
    FrameChannel.Body body = channel.body(Sidecar::toException);
    ByteBuffer got = ByteBuffer.allocate(3);
    body.readFully(got);
    IOException e = assertThrows(IOException.class, () -> body.read(ByteBuffer.allocate(10)), "cut short");
    assertTrue(e.getMessage().contains("gone"), e.getMessage());
    assertTrue(body.isDone(), "the body is over; the connection is in step");
  }

  @Test
  void testErrorTypesBecomeJavaExceptions() {
    assertInstanceOf(FileNotFoundException.class, mapped("FileNotFound"), "FileNotFound");
    assertInstanceOf(org.apache.hadoop.fs.FileAlreadyExistsException.class, mapped("FileAlreadyExists"),
        "FileAlreadyExists");
    assertInstanceOf(java.nio.file.AccessDeniedException.class, mapped("AccessDenied"), "AccessDenied");
    assertEquals(Sidecar.UnknownConfigurationException.class, mapped("UnknownConfiguration").getClass(),
        "unknown conf");
    assertEquals(FrameChannel.FrameTooLargeException.class, mapped("FrameTooLarge").getClass(), "frame");
    assertInstanceOf(IllegalArgumentException.class, mapped("IllegalArgument").getCause(), "illegal argument");
    for (String family : new String[] {"Transient", "Unreachable", "IllegalState", "IO", "Security"}) {
      Throwable e = mapped(family);
      assertEquals(SidecarErrors.SidecarIOException.class, e.getClass(), family);
      assertEquals(family, ((SidecarErrors.SidecarIOException) e).family(), family);
    }
  }

  @Test
  void testAnErrorCarriesTheS3CodeTheObjectAndTheUpload() {
    Map<String, Object> error = new HashMap<>();
    error.put("type", "FileNotFound");
    error.put("message", "CompleteMultipartUpload failed for s3://b/k: NoSuchUpload");
    error.put("error_class", "NoSuchUploadError");
    error.put("code", "NoSuchUpload");
    error.put("bucket", "b");
    error.put("key", "out/part-0");
    error.put("upload_id", "u-1");
    Throwable e = mapped(error);
    assertInstanceOf(FileNotFoundException.class, e, e.getClass().getName());
    SidecarErrors.Details details = (SidecarErrors.Details) e;
    assertEquals("NoSuchUpload", details.code(), "code");
    assertEquals("b", details.bucket(), "bucket");
    assertEquals("out/part-0", details.key(), "key");
    assertEquals("u-1", details.uploadId(), "upload");
    assertEquals("NoSuchUploadError", details.errorClass(), "python class");
    error.put("type", "AccessDenied");
    error.put("code", "AccessDenied");
    java.nio.file.AccessDeniedException denied = (java.nio.file.AccessDeniedException) mapped(error);
    assertEquals("b/out/part-0", denied.getFile(), "the object denied");
    assertEquals("AccessDenied", ((SidecarErrors.Details) denied).code(), "code");
  }

  private static Throwable mapped(String type) {
    Map<String, Object> error = new HashMap<>();
    error.put("type", type);
    error.put("message", "m");
    return mapped(error);
  }

  private static Throwable mapped(Map<String, Object> error) {
    Map<String, Object> header = new HashMap<>();
    header.put("error", error);
    IOException wrapped = Sidecar.toException(header);
    return wrapped.getCause();
  }
}

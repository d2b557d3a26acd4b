package s3commit.hadoop;

import java.io.IOException;
import java.io.OutputStream;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * An output stream that ships its bytes to a writer in the sidecar, a chunk at a time (so a file is never
 * held whole in the JVM). The sidecar writer uploads parts in the background and, on close, completes the
 * upload (a plain path) or records it as pending (a magic path). An exception before close leaves the
 * upload to be aborted by the task abort; {@link #close} after a failed write aborts it at once.
 */
class S3OutputStream extends OutputStream {
  private final S3FileSystem fs;
  private final String location;
  private final long handle;
  private final boolean magic;
  private final byte[] chunk;
  private int filled;
  private long written;
  private boolean closed;
  private boolean failed;

  S3OutputStream(S3FileSystem fs, String location, int chunkSize) throws IOException {
    this.fs = fs;
    this.location = location;
    Map<String, Object> args = new HashMap<>();
    args.put("conf_id", fs.confId());
    args.put("path", location);
    Map<String, Object> opened = fs.sidecar().call("fs.open_write", args).header;
    this.handle = ((Number) opened.get("handle")).longValue();
    this.magic = Boolean.TRUE.equals(opened.get("magic"));
    this.chunk = new byte[chunkSize];
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
    while (len > 0) {
      int n = Math.min(len, chunk.length - filled);
      System.arraycopy(b, off, chunk, filled, n);
      filled += n;
      off += n;
      len -= n;
      written += n;
      if (filled == chunk.length) {
        ship();
      }
    }
  }

  private void ship() throws IOException {
    if (filled == 0) {
      return;
    }
    Map<String, Object> args = new HashMap<>();
    args.put("handle", handle);
    try {
      fs.sidecar().call("fs.write", args, filled == chunk.length ? chunk : Arrays.copyOf(chunk, filled));
    } catch (IOException e) {
      failed = true;
      throw e;
    }
    filled = 0;
  }

  @Override
  public synchronized void close() throws IOException {
    if (closed) {
      return;
    }
    closed = true;
    Map<String, Object> args = new HashMap<>();
    args.put("handle", handle);
    if (failed) {
      fs.sidecar().cleanup("fs.abort_write", args);
      return;
    }
    try {
      ship();
      fs.sidecar().call("fs.close_write", args);
    } catch (IOException e) {
      fs.sidecar().cleanup("fs.abort_write", args);
      throw e;
    }
    if (magic) {
      S3FileSystem.recordMagicLength(location, written);
    }
  }
}

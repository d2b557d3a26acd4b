package s3commit.hadoop;

import org.apache.hadoop.fs.FSInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

import java.io.EOFException;
import java.io.IOException;
import java.util.Map;

/**
 * A seekable stream over one S3 object: ranged GETs through the sidecar, with read-ahead.
 *
 * <p>Each fetch reads at least {@code READ_AHEAD} bytes (or to the end of the object), so sequential reads
 * cost one request per block while columnar readers that seek (Parquet, ORC footers) fetch only what they
 * touch.
 */
class S3InputStream extends FSInputStream {
  static final int READ_AHEAD = 1024 * 1024;

  private final S3FileSystem fs;
  private final Path path;
  private final long length;
  private final FileSystem.Statistics statistics;
  private long pos;
  private byte[] buffer = new byte[0];
  private long bufferStart;
  private boolean closed;

  S3InputStream(S3FileSystem fs, Path path, long length, FileSystem.Statistics statistics) {
    this.fs = fs;
    this.path = path;
    this.length = length;
    this.statistics = statistics;
  }

  @Override
  public synchronized void seek(long target) throws IOException {
    if (target < 0 || target > length) {
      throw new EOFException("seek to " + target + " outside 0.." + length + " of " + path);
    }
    pos = target;
  }

  @Override
  public synchronized long getPos() {
    return pos;
  }

  @Override
  public boolean seekToNewSource(long targetPos) {
    return false;
  }

  @Override
  public synchronized int available() {
    return (int) Math.min(Integer.MAX_VALUE, length - pos);
  }

  @Override
  public synchronized int read() throws IOException {
    byte[] one = new byte[1];
    int n = read(one, 0, 1);
    return n < 0 ? -1 : one[0] & 0xff;
  }

  @Override
  public synchronized int read(byte[] b, int off, int len) throws IOException {
    if (closed) {
      throw new IOException("stream is closed: " + path);
    }
    if (len == 0) {
      return 0;
    }
    if (pos >= length) {
      return -1;
    }
    if (pos < bufferStart || pos >= bufferStart + buffer.length) {
      fill(len);
    }
    int offset = (int) (pos - bufferStart);
    int n = Math.min(len, buffer.length - offset);
    System.arraycopy(buffer, offset, b, off, n);
    pos += n;
    return n;
  }

  private void fill(int wanted) throws IOException {
    long size = Math.min(length - pos, Math.max(wanted, READ_AHEAD));
    Map<String, Object> args = fs.args(path);
    args.put("offset", pos);
    args.put("length", size);
    buffer = fs.sidecar().call("fs.read", args).payload;
    bufferStart = pos;
    if (statistics != null) {
      statistics.incrementBytesRead(buffer.length);
      statistics.incrementReadOps(1);
    }
    if (buffer.length == 0) {
      throw new EOFException("unexpected end of " + path + " at " + pos);
    }
  }

  @Override
  public synchronized void close() {
    closed = true;
    buffer = new byte[0];
  }
}

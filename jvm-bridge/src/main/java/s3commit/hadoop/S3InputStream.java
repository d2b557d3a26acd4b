package s3commit.hadoop;

import org.apache.hadoop.fs.CanUnbuffer;
import org.apache.hadoop.fs.FSExceptionMessages;
import org.apache.hadoop.fs.FSInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.StreamCapabilities;

import java.io.EOFException;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A seekable stream over one S3 object, read through the sidecar with S3A's input policies.
 *
 * <ul>
 *   <li>{@code sequential}: the object is read in blocks fetched ahead in parallel while the caller consumes
 *   the current one, so a reader never waits on one small round trip after another. The first block is of
 *   {@code fs.s3a.prefetch.block.size}; while the stream reads in order each next one doubles, up to
 *   {@code s3commit.prefetch.max-block-size} (a long read costs a few GETs, not one per small block: a GET
 *   has a price per request, and some stores read the whole object for each range). At most
 *   {@code fs.s3a.prefetch.block.count} blocks and {@code s3commit.prefetch.max-ahead} bytes are in flight
 *   (always one block). A seek outside the blocks in hand starts again from there, at the first size.</li>
 *   <li>{@code random}: each read fetches what it asks for, rounded up to {@code fs.s3a.readahead.range},
 *   and nothing ahead (columnar formats jump between footers and column chunks).</li>
 *   <li>{@code normal} (adaptive, the default): sequential until the first backward seek, random after.</li>
 * </ul>
 *
 * <p>The policy comes from {@code fs.s3a.experimental.input.fadvise}, or per file from {@code openFile()}'s
 * {@code fs.option.openfile.read.policy} (a list: the first known name wins; {@code parquet}, {@code orc},
 * {@code columnar}, {@code vector} mean random, {@code whole-file} sequential, {@code adaptive} normal).
 * {@code fs.option.openfile.split.end} stops sequential prefetching at the end of the split (plus one
 * block, for the record that crosses it). Positioned reads ({@code read(position, ...)}, {@code readFully})
 * fetch exactly what they ask for and never move the stream. Every fetch is a stateless ranged GET in the
 * sidecar, streamed straight into the block's buffer (a direct one, reused from block to block:
 * {@link ReadBuffers}); a fetch that finds its sidecar gone is sent to the next one.
 */
class S3InputStream extends FSInputStream implements CanUnbuffer, StreamCapabilities {
  /** Read policies. */
  enum Policy {
    SEQUENTIAL, RANDOM, NORMAL;

    /** The first policy named in a comma-separated list that this stream knows; {@code fallback} if none. */
    static Policy parse(String names, Policy fallback) {
      if (names == null) {
        return fallback;
      }
      for (String raw : names.split(",")) {
        switch (raw.trim().toLowerCase(Locale.ROOT)) {
          case "sequential":
          case "whole-file":
            return SEQUENTIAL;
          case "random":
          case "parquet":
          case "orc":
          case "columnar":
          case "vector":
            return RANDOM;
          case "normal":
          case "adaptive":
          case "default":
            return NORMAL;
          default:
            // not ours: try the next name
        }
      }
      return fallback;
    }
  }

  /** How a stream reads: its policy and sizes. */
  static final class Options {
    final Policy policy;
    final int readahead;
    final int blockSize;
    final int prefetchBlocks;
    final int maxBlockSize;
    final long maxAhead;
    final long splitEnd;

    Options(Policy policy, int readahead, int blockSize, int prefetchBlocks, int maxBlockSize, long maxAhead,
        long splitEnd) {
      this.policy = policy;
      this.readahead = Math.max(1, readahead);
      this.blockSize = Math.max(64 * 1024, blockSize);
      this.prefetchBlocks = Math.max(1, prefetchBlocks);
      this.maxBlockSize = Math.max(this.blockSize, maxBlockSize);
      this.maxAhead = Math.max(1, maxAhead);
      this.splitEnd = splitEnd;
    }

    Options withPolicy(Policy p, long end) {
      return new Options(p, readahead, blockSize, prefetchBlocks, maxBlockSize, maxAhead, end);
    }

    /**
     * Spark's shuffle files ({@code shuffle_<shuffle>_<map>_<reduce>.index|.data}) in its decommissioning's
     * fallback storage: Spark reads a block by skipping to its two offsets in the index and reading exactly the
     * block from the data file, once. Random reads with a readahead of the two offsets (16 bytes) make each of those
     * one ranged GET of what is read (a data block under 16 bytes is read as 16, or to the end of the file).
     */
    Options forShuffleFiles() {
      return new Options(Policy.RANDOM, SHUFFLE_READAHEAD, blockSize, prefetchBlocks, maxBlockSize, maxAhead, -1);
    }
  }

  /** Two index entries: a shuffle block's start and end offsets. */
  static final int SHUFFLE_READAHEAD = 16;

  /** Whether {@code location} names one of Spark's shuffle index or data files. */
  static boolean isShuffleFile(String location) {
    String name = location.substring(location.lastIndexOf('/') + 1);
    return name.matches("shuffle_\\d+_\\d+_\\d+\\.(index|data)");
  }

  private static final ByteBuffer EMPTY = ByteBuffer.allocate(0);
  private static final AtomicInteger THREADS = new AtomicInteger();
  /** Threads for prefetching and vectored reads, shared by every stream of this JVM (idle ones exit). */
  static final ExecutorService FETCHERS = Executors.newCachedThreadPool(runnable -> {
    Thread thread = new Thread(runnable, "s3commit-fetch-" + THREADS.incrementAndGet());
    thread.setDaemon(true);
    return thread;
  });

  /** A block fetched ahead. */
  private static final class Block {
    final long start;
    final int length;
    final CompletableFuture<ByteBuffer> data;

    Block(long start, int length, CompletableFuture<ByteBuffer> data) {
      this.start = start;
      this.length = length;
      this.data = data;
    }

    long end() {
      return start + length;
    }

    /** Not wanted any more: its buffer goes back to the pool once its fetch has finished with it. */
    void discard() {
      data.whenComplete((buffer, error) -> ReadBuffers.give(buffer));
    }
  }

  protected final S3FileSystem fs;
  protected final String location;
  protected final long length;
  protected final FileSystem.Statistics statistics;
  protected final Options options;
  private boolean random;
  private long pos;
  /** The bytes in hand, {@code [bufferStart, bufferStart + buffer.limit())}, read with absolute gets. */
  private ByteBuffer buffer = EMPTY;
  private long bufferStart;
  private final ArrayDeque<Block> ahead = new ArrayDeque<>();
  private long nextFetch;
  /** The size of the next sequential block: the block size at each new run, doubling while it reads in order. */
  private int nextBlockSize;
  /** The most bytes this stream has had in flight ahead of its reader (diagnostics: {@link #toString}). */
  private long mostAhead;
  private boolean closed;

  S3InputStream(S3FileSystem fs, String location, long length, FileSystem.Statistics statistics,
      Options options) {
    this.fs = fs;
    this.location = location;
    this.length = length;
    this.statistics = statistics;
    this.options = options;
    this.random = options.policy == Policy.RANDOM;
  }

  /** The policy in force now (normal turns random at its first backward seek). */
  synchronized Policy policyNow() {
    return random ? Policy.RANDOM : Policy.SEQUENTIAL;
  }

  protected void checkOpen() throws IOException {
    if (closed) {
      throw new IOException(FSExceptionMessages.STREAM_IS_CLOSED + " " + location);
    }
  }

  @Override
  public synchronized void seek(long target) throws IOException {
    checkOpen();
    if (target < 0) {
      throw new EOFException(FSExceptionMessages.NEGATIVE_SEEK + " " + target + ": " + location);
    }
    if (target > length) {
      throw new EOFException(FSExceptionMessages.CANNOT_SEEK_PAST_EOF + " " + target + " > " + length + ": "
          + location);
    }
    if (target < pos && options.policy == Policy.NORMAL && !random) {
      random = true;  // adaptive: the first backward seek means random IO
      discardAhead();
    }
    pos = target;
  }

  @Override
  public synchronized long getPos() {
    return pos;
  }

  /** Skipping moves the position only (a forward seek, up to the end): no byte is fetched to be thrown away. */
  @Override
  public synchronized long skip(long n) throws IOException {
    checkOpen();
    if (n <= 0 || pos >= length) {
      return 0;
    }
    long skipped = Math.min(n, length - pos);
    seek(pos + skipped);
    return skipped;
  }

  @Override
  public boolean seekToNewSource(long targetPos) {
    return false;
  }

  @Override
  public synchronized int available() throws IOException {
    checkOpen();
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
    checkOpen();
    java.util.Objects.checkFromIndexSize(off, len, b.length);
    if (len == 0) {
      return 0;
    }
    if (pos >= length) {
      return -1;
    }
    if (pos < bufferStart || pos >= bufferStart + buffer.limit()) {
      fill(len);
    }
    int offset = (int) (pos - bufferStart);
    int n = Math.min(len, buffer.limit() - offset);
    buffer.get(offset, b, off, n);
    pos += n;
    if (statistics != null) {
      statistics.incrementBytesRead(n);
    }
    return n;
  }

  /** Make {@link #buffer} hold {@link #pos}: the next prefetched block, or a fetch of what is asked. */
  private void fill(int wanted) throws IOException {
    if (random) {
      int size = (int) Math.min(length - pos, Math.max(wanted, options.readahead));
      StreamCounters.RANDOM_FETCHES.incrementAndGet();
      setBuffer(pos, ByteBuffer.wrap(fetch(pos, size)));
      return;
    }
    while (!ahead.isEmpty() && ahead.peekFirst().end() <= pos) {
      ahead.pollFirst().discard();  // passed over by a forward seek
    }
    if (ahead.isEmpty() || ahead.peekFirst().start > pos) {
      if (ahead.isEmpty() && nextFetch == pos && nextBlockSize > 0) {
        // the reader has caught up with the blocks: the run goes on (its blocks keep their size)
      } else {
        nextBlockSize = options.blockSize;  // a new run, from the first size
      }
      discardAhead();
      nextFetch = pos;
    }
    topUp();
    Block block = ahead.pollFirst();
    setBuffer(block.start, await(block));
    topUp();
  }

  private void setBuffer(long start, ByteBuffer data) {
    ReadBuffers.give(buffer);
    buffer = data;
    bufferStart = start;
  }

  private long bytesAhead() {
    long bytes = 0;
    for (Block block : ahead) {
      bytes += block.length;
    }
    return bytes;
  }

  private void discardAhead() {
    for (Block block : ahead) {
      block.discard();
    }
    ahead.clear();
  }

  private Block fetchAhead(long start, int size, int blockSize) {
    CompletableFuture<ByteBuffer> data = CompletableFuture.supplyAsync(() -> {
      ByteBuffer target = ReadBuffers.take(size, blockSize);
      try {
        fetchInto(start, target.duplicate());
        return target;
      } catch (IOException e) {
        ReadBuffers.give(target);
        throw new CompletionException(e);
      } catch (RuntimeException | Error e) {
        ReadBuffers.give(target);
        throw e;
      }
    }, FETCHERS);
    return new Block(start, size, data);
  }

  /**
   * Keep blocks in flight ahead: at most {@code fs.s3a.prefetch.block.count} of them and
   * {@code s3commit.prefetch.max-ahead} bytes (always one), within the split plus one first-size block.
   */
  private void topUp() {
    long limit = options.splitEnd > 0 ? Math.min(length, options.splitEnd + options.blockSize) : length;
    while (ahead.size() < options.prefetchBlocks && nextFetch < limit
        && (ahead.isEmpty() || bytesAhead() + Math.min(nextBlockSize, limit - nextFetch) <= options.maxAhead)) {
      final long start = nextFetch;
      final int blockSize = nextBlockSize;
      final int size = (int) Math.min(blockSize, limit - start);
      int bufferClass = options.blockSize;  // a short last block takes a buffer of the smallest size it fits
      while (bufferClass < size) {
        bufferClass *= 2;
      }
      ahead.addLast(fetchAhead(start, size, Math.min(bufferClass, blockSize)));
      StreamCounters.SEQUENTIAL_BLOCKS.incrementAndGet();
      nextFetch += size;
      nextBlockSize = (int) Math.min((long) blockSize * 2, options.maxBlockSize);
      mostAhead = Math.max(mostAhead, bytesAhead());
    }
    if (ahead.isEmpty() && nextFetch < length) {
      // Past the split's end: small reads of what the record reader still needs.
      final long start = nextFetch;
      final int size = (int) Math.min(options.readahead, length - start);
      ahead.addLast(fetchAhead(start, size, options.blockSize));
      nextFetch += size;
    }
  }

  private ByteBuffer await(Block block) throws IOException {
    try {
      return block.data.get();
    } catch (InterruptedException e) {
      block.discard();
      Thread.currentThread().interrupt();
      throw new InterruptedIOException("interrupted while reading " + location);
    } catch (CancellationException e) {
      throw new IOException("a read of " + location + " was cancelled", e);
    } catch (ExecutionException e) {
      discardAhead();
      Throwable cause = e.getCause();
      if (cause instanceof IOException) {
        throw (IOException) cause;
      }
      throw new IOException("reading " + location + " at " + block.start + " failed: " + cause, cause);
    }
  }

  /** Bytes {@code [offset, offset + size)} of the object, from one ranged GET streamed through the sidecar. */
  protected byte[] fetch(long offset, int size) throws IOException {
    byte[] data = new byte[size];
    if (size > 0) {
      fetchInto(offset, ByteBuffer.wrap(data));
    }
    return data;
  }

  /** Fill {@code target} with the object's bytes from {@code offset}. */
  protected void fetchInto(long offset, ByteBuffer target) throws IOException {
    Map<String, Object> args = fs.args(location);
    args.put("offset", offset);
    args.put("length", target.remaining());
    int size = target.remaining();
    s3commit.bridge.Sidecar.run("fs.read", args, null, (header, body) -> {
      if (body == null) {
        throw new EOFException("no data for " + location + " at " + offset);
      }
      body.readFully(target.duplicate());
      return null;
    });
    target.position(target.position() + size);
    StreamCounters.BYTES_FETCHED.addAndGet(size);
    if (statistics != null) {
      statistics.incrementReadOps(1);
    }
  }

  // --- positioned reads: never move the stream -------------------------------------------------

  @Override
  public int read(long position, byte[] b, int off, int len) throws IOException {
    validatePositionedReadArgs(position, b, off, len);
    if (len == 0) {
      return 0;
    }
    synchronized (this) {
      checkOpen();
      if (position >= length) {
        return -1;
      }
      if (position >= bufferStart && position < bufferStart + buffer.limit()) {
        int offset = (int) (position - bufferStart);
        int n = Math.min(len, buffer.limit() - offset);
        buffer.get(offset, b, off, n);
        return n;
      }
    }
    int n = (int) Math.min(len, length - position);
    StreamCounters.POSITIONED_FETCHES.incrementAndGet();
    fetchInto(position, ByteBuffer.wrap(b, off, n));
    if (statistics != null) {
      statistics.incrementBytesRead(n);
    }
    return n;
  }

  @Override
  public void readFully(long position, byte[] b, int off, int len) throws IOException {
    validatePositionedReadArgs(position, b, off, len);
    if (len == 0) {
      return;
    }
    checkOpen();
    if (position + len > length) {
      throw new EOFException(FSExceptionMessages.EOF_IN_READ_FULLY + " " + len + " bytes at " + position
          + " of " + length + ": " + location);
    }
    int done = 0;
    while (done < len) {
      int n = read(position + done, b, off + done, len - done);
      if (n < 0) {
        throw new EOFException(FSExceptionMessages.EOF_IN_READ_FULLY + " " + location);
      }
      done += n;
    }
  }

  @Override
  public synchronized void unbuffer() {
    setBuffer(0, EMPTY);
    discardAhead();
  }

  @Override
  public boolean hasCapability(String capability) {
    switch (capability.toLowerCase(Locale.ROOT)) {
      case "in:unbuffer":
      case "in:readahead":
        return true;
      default:
        return false;
    }
  }

  @Override
  public synchronized void close() {
    closed = true;
    unbuffer();
  }

  @Override
  public String toString() {
    return "S3InputStream{" + location + ", length=" + length + ", policy=" + options.policy
        + (random && options.policy == Policy.NORMAL ? "(now random)" : "") + ", pos=" + pos + ", most ahead="
        + mostAhead + "}";
  }
}

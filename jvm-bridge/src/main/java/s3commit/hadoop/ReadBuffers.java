package s3commit.hadoop;

import java.nio.ByteBuffer;
import java.util.Queue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Direct buffers for the blocks a stream reads ahead, reused from one block (and one stream) to the next.
 *
 * <p>A block read into a direct buffer costs one copy in the JVM (into the caller's array) where a fresh heap
 * array costs three passes: zeroing it, NIO's copy through its own direct buffer, and that copy. Buffers are of
 * the stream's block size and kept idle up to {@link #IDLE_LIMIT} bytes in all; a block of half the block size
 * or less (a small file, the end of one) is read into a heap array of its own size, never pooled (direct memory
 * is returned only by a garbage collection); so is a block when direct memory is exhausted.
 */
final class ReadBuffers {
  static final long IDLE_LIMIT = 128L * 1024 * 1024;
  /** Below this a block is read into a heap array whatever the block size. */
  static final int DIRECT_MIN = 256 * 1024;
  private static final ConcurrentHashMap<Integer, Queue<ByteBuffer>> IDLE = new ConcurrentHashMap<>();
  private static final AtomicLong IDLE_BYTES = new AtomicLong();
  /** Buffers handed out that were reused rather than allocated. */
  static final AtomicLong REUSED = new AtomicLong();

  private ReadBuffers() {
  }

  /** A buffer for {@code size} bytes of a stream reading blocks of {@code blockSize}: position 0, limit size. */
  static ByteBuffer take(int size, int blockSize) {
    if (size < DIRECT_MIN || size <= blockSize / 2 || size > blockSize) {
      return ByteBuffer.allocate(size);
    }
    ByteBuffer idle = IDLE.computeIfAbsent(blockSize, c -> new ConcurrentLinkedQueue<>()).poll();
    if (idle != null) {
      IDLE_BYTES.addAndGet(-blockSize);
      REUSED.incrementAndGet();
      return idle.clear().limit(size);
    }
    try {
      return ByteBuffer.allocateDirect(blockSize).limit(size);
    } catch (OutOfMemoryError e) {
      return ByteBuffer.allocate(size);
    }
  }

  /** Hand {@code buffer} back once nothing reads it any more (kept only if it is of a block size, under the limit). */
  static void give(ByteBuffer buffer) {
    if (buffer == null || !buffer.isDirect()) {
      return;
    }
    Queue<ByteBuffer> queue = IDLE.get(buffer.capacity());
    if (queue == null) {
      return;
    }
    if (IDLE_BYTES.addAndGet(buffer.capacity()) > IDLE_LIMIT) {
      IDLE_BYTES.addAndGet(-buffer.capacity());
      return;
    }
    queue.offer(buffer);
  }

  /** Bytes held idle now. */
  static long idleBytes() {
    return IDLE_BYTES.get();
  }
}

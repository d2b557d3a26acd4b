package s3commit.hadoop;

import static s3commit.testing.JavaTests.equal;

import java.nio.ByteBuffer;

/** The read-ahead blocks' buffers: direct and reused at the block size, heap arrays otherwise. */
public final class ReadBuffersTest {
  private static final int BLOCK = 1024 * 1024;

  private ReadBuffersTest() {
  }

  public static void testABlockBufferIsDirectAndReused() {
    ByteBuffer first = ReadBuffers.take(BLOCK, BLOCK);
    equal(true, first.isDirect(), "a whole block: direct");
    equal(0, first.position(), "position");
    equal(BLOCK, first.limit(), "limit");
    first.put(0, (byte) 7).position(100);
    ReadBuffers.give(first);
    long reused = ReadBuffers.REUSED.get();
    ByteBuffer again = ReadBuffers.take(BLOCK - 10, BLOCK);
    equal(true, again == first, "the idle buffer is handed out again");
    equal(reused + 1, ReadBuffers.REUSED.get(), "counted");
    equal(0, again.position(), "reset position");
    equal(BLOCK - 10, again.limit(), "limited to the size asked");
    ReadBuffers.give(again);
  }

  public static void testSmallBlocksAreHeapArraysNeverPooled() {
    long idle = ReadBuffers.idleBytes();
    ByteBuffer small = ReadBuffers.take(BLOCK / 2, BLOCK);
    equal(false, small.isDirect(), "half a block: heap");
    equal(BLOCK / 2, small.capacity(), "of its own size");
    ReadBuffers.give(small);
    equal(idle, ReadBuffers.idleBytes(), "not kept");
    equal(false, ReadBuffers.take(4096, 4096).isDirect(), "under DIRECT_MIN: heap whatever the block size");
  }

  public static void testIdleBuffersAreBoundedInBytes() {
    int block = 16 * 1024 * 1024;
    int count = (int) (ReadBuffers.IDLE_LIMIT / block) + 3;
    ByteBuffer[] buffers = new ByteBuffer[count];
    for (int i = 0; i < count; i++) {
      buffers[i] = ReadBuffers.take(block, block);
    }
    for (ByteBuffer buffer : buffers) {
      ReadBuffers.give(buffer);
    }
    equal(true, ReadBuffers.idleBytes() <= ReadBuffers.IDLE_LIMIT, "at most the limit kept: "
        + ReadBuffers.idleBytes());
    for (int i = 0; i < count; i++) {
      ReadBuffers.take(block, block);  // empty the pool again for the other tests
    }
  }
}

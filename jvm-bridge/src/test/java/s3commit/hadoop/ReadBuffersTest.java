package s3commit.hadoop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

import java.nio.ByteBuffer;

/** The read-ahead blocks' buffers: direct and reused at the block size, heap arrays otherwise. */
@TestMethodOrder(MethodOrderer.MethodName.class)  // the pool is the JVM's: each test leaves it as it found it
final class ReadBuffersTest {
  private static final int BLOCK = 1024 * 1024;

  @Test
  void testABlockBufferIsDirectAndReused() {
    ByteBuffer first = ReadBuffers.take(BLOCK, BLOCK);
    assertTrue(first.isDirect(), "a whole block: direct");
    assertEquals(0, first.position(), "position");
    assertEquals(BLOCK, first.limit(), "limit");
    first.put(0, (byte) 7).position(100);
    ReadBuffers.give(first);
    long reused = ReadBuffers.REUSED.get();
    ByteBuffer again = ReadBuffers.take(BLOCK - 10, BLOCK);
    assertSame(first, again, "the idle buffer is handed out again");
    assertEquals(reused + 1, ReadBuffers.REUSED.get(), "counted");
    assertEquals(0, again.position(), "reset position");
    assertEquals(BLOCK - 10, again.limit(), "limited to the size asked");
    ReadBuffers.give(again);
  }

  @Test
  void testSmallBlocksAreHeapArraysNeverPooled() {
    long idle = ReadBuffers.idleBytes();
    ByteBuffer small = ReadBuffers.take(BLOCK / 2, BLOCK);
    assertFalse(small.isDirect(), "half a block: heap");
    assertEquals(BLOCK / 2, small.capacity(), "of its own size");
    ReadBuffers.give(small);
    assertEquals(idle, ReadBuffers.idleBytes(), "not kept");
    assertFalse(ReadBuffers.take(4096, 4096).isDirect(), "under DIRECT_MIN: heap whatever the block size");
  }

  @Test
  void testIdleBuffersAreBoundedInBytes() {
    int block = 16 * 1024 * 1024;
    int count = (int) (ReadBuffers.IDLE_LIMIT / block) + 3;
    ByteBuffer[] buffers = new ByteBuffer[count];
    for (int i = 0; i < count; i++) {
      buffers[i] = ReadBuffers.take(block, block);
    }
    for (ByteBuffer buffer : buffers) {
      ReadBuffers.give(buffer);
    }
    assertTrue(ReadBuffers.idleBytes() <= ReadBuffers.IDLE_LIMIT, "at most the limit kept: "
        + ReadBuffers.idleBytes());
    for (int i = 0; i < count; i++) {
      ReadBuffers.take(block, block);  // empty the pool again for the other tests
    }
  }
}

package s3commit.hadoop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import java.io.EOFException;
import java.util.ArrayList;
import java.util.List;

/** The range arithmetic of vectored reads: validation, sorting, merging. */
final class VectoredRangesTest {
  private static List<VectoredRanges.Range> ranges(long... offsetsAndLengths) {
    List<VectoredRanges.Range> out = new ArrayList<>();
    for (int i = 0; i < offsetsAndLengths.length; i += 2) {
      out.add(new VectoredRanges.Range(offsetsAndLengths[i], (int) offsetsAndLengths[i + 1], i / 2));
    }
    return out;
  }

  @Test
  void testRangesAreSortedByOffsetAndKeepTheirIndex() throws Exception {
    List<VectoredRanges.Range> sorted = VectoredRanges.validateAndSort(ranges(100, 10, 0, 5, 50, 1), 1000);
    assertEquals(0L, sorted.get(0).offset, "first");
    assertEquals(1, sorted.get(0).index, "index of the first");
    assertEquals(50L, sorted.get(1).offset, "second");
    assertEquals(100L, sorted.get(2).offset, "third");
  }

  @Test
  void testOverlappingRangesAreRefused() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> VectoredRanges.validateAndSort(ranges(0, 10, 5, 10), 100), "overlap");
    assertTrue(e.getMessage().contains("overlap"), "the message says why: " + e.getMessage());
  }

  @Test
  void testANegativeOffsetIsAnEofAndANegativeLengthIllegal() {
    assertThrows(EOFException.class, () -> VectoredRanges.validateAndSort(ranges(-1, 10), 100), "negative offset");
    assertThrows(IllegalArgumentException.class, () -> VectoredRanges.validateAndSort(ranges(0, -1), 100),
        "negative length");
  }

  @Test
  void testARangePastTheEndIsAnEofWhenTheLengthIsKnown() throws Exception {
    assertThrows(EOFException.class, () -> VectoredRanges.validateAndSort(ranges(95, 10), 100), "past the end");
    assertEquals(1, VectoredRanges.validateAndSort(ranges(95, 10), -1).size(), "unknown length: not checked");
    assertEquals(1, VectoredRanges.validateAndSort(ranges(90, 10), 100).size(), "ending exactly at the end");
  }

  @Test
  void testRangesCloserThanTheMinimumSeekMergeUpToTheMaximumSize() throws Exception {
    List<VectoredRanges.Range> sorted = VectoredRanges.validateAndSort(
        ranges(0, 100, 150, 100, 1000, 100, 1100, 100, 5000, 10), -1);
    List<VectoredRanges.Merged> merged = VectoredRanges.merge(sorted, 100, 1000);
    assertEquals(3, merged.size(), "reads");
    assertEquals(0L, merged.get(0).offset, "first read starts");
    assertEquals(250, merged.get(0).length(), "first read covers the gap of 50");
    assertEquals(2, merged.get(0).parts.size(), "first read holds two ranges");
    assertEquals(200, merged.get(1).length(), "adjacent ranges merge");
    assertEquals(10, merged.get(2).length(), "a far range stays alone");
  }

  @Test
  void testMergingStopsAtTheMaximumMergedSize() throws Exception {
    List<VectoredRanges.Range> sorted = VectoredRanges.validateAndSort(ranges(0, 600, 600, 600, 1200, 600), -1);
    List<VectoredRanges.Merged> merged = VectoredRanges.merge(sorted, 4096, 1000);
    assertEquals(3, merged.size(), "each range alone: any two exceed 1000 bytes");
    merged = VectoredRanges.merge(sorted, 4096, 1200);
    assertEquals(2, merged.size(), "two fit in 1200");
  }

  @Test
  void testNoRangesNoReads() throws Exception {
    assertEquals(0, VectoredRanges.merge(VectoredRanges.validateAndSort(ranges(), 10), 10, 10).size(), "empty");
  }
}

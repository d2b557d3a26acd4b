package s3commit.hadoop;

import static s3commit.testing.JavaTests.check;
import static s3commit.testing.JavaTests.equal;
import static s3commit.testing.JavaTests.raises;

import java.io.EOFException;
import java.util.ArrayList;
import java.util.List;

/** The range arithmetic of vectored reads: validation, sorting, merging. */
public final class VectoredRangesTest {
  private VectoredRangesTest() {
  }

  private static List<VectoredRanges.Range> ranges(long... offsetsAndLengths) {
    List<VectoredRanges.Range> out = new ArrayList<>();
    for (int i = 0; i < offsetsAndLengths.length; i += 2) {
      out.add(new VectoredRanges.Range(offsetsAndLengths[i], (int) offsetsAndLengths[i + 1], i / 2));
    }
    return out;
  }

  public static void testRangesAreSortedByOffsetAndKeepTheirIndex() throws Exception {
    List<VectoredRanges.Range> sorted = VectoredRanges.validateAndSort(ranges(100, 10, 0, 5, 50, 1), 1000);
    equal(0L, sorted.get(0).offset, "first");
    equal(1, sorted.get(0).index, "index of the first");
    equal(50L, sorted.get(1).offset, "second");
    equal(100L, sorted.get(2).offset, "third");
  }

  public static void testOverlappingRangesAreRefused() {
    IllegalArgumentException e = raises(IllegalArgumentException.class,
        () -> VectoredRanges.validateAndSort(ranges(0, 10, 5, 10), 100), "overlap");
    check(e.getMessage().contains("overlap"), "the message says why: " + e.getMessage());
  }

  public static void testANegativeOffsetIsAnEofAndANegativeLengthIllegal() {
    raises(EOFException.class, () -> VectoredRanges.validateAndSort(ranges(-1, 10), 100), "negative offset");
    raises(IllegalArgumentException.class, () -> VectoredRanges.validateAndSort(ranges(0, -1), 100), "negative length");
  }

  public static void testARangePastTheEndIsAnEofWhenTheLengthIsKnown() throws Exception {
    raises(EOFException.class, () -> VectoredRanges.validateAndSort(ranges(95, 10), 100), "past the end");
    equal(1, VectoredRanges.validateAndSort(ranges(95, 10), -1).size(), "unknown length: not checked");
    equal(1, VectoredRanges.validateAndSort(ranges(90, 10), 100).size(), "ending exactly at the end");
  }

  public static void testRangesCloserThanTheMinimumSeekMergeUpToTheMaximumSize() throws Exception {
    List<VectoredRanges.Range> sorted = VectoredRanges.validateAndSort(
        ranges(0, 100, 150, 100, 1000, 100, 1100, 100, 5000, 10), -1);
    List<VectoredRanges.Merged> merged = VectoredRanges.merge(sorted, 100, 1000);
    equal(3, merged.size(), "reads");
    equal(0L, merged.get(0).offset, "first read starts");
    equal(250, merged.get(0).length(), "first read covers the gap of 50");
    equal(2, merged.get(0).parts.size(), "first read holds two ranges");
    equal(200, merged.get(1).length(), "adjacent ranges merge");
    equal(10, merged.get(2).length(), "a far range stays alone");
  }

  public static void testMergingStopsAtTheMaximumMergedSize() throws Exception {
    List<VectoredRanges.Range> sorted = VectoredRanges.validateAndSort(ranges(0, 600, 600, 600, 1200, 600), -1);
    List<VectoredRanges.Merged> merged = VectoredRanges.merge(sorted, 4096, 1000);
    equal(3, merged.size(), "each range alone: any two exceed 1000 bytes");
    merged = VectoredRanges.merge(sorted, 4096, 1200);
    equal(2, merged.size(), "two fit in 1200");
  }

  public static void testNoRangesNoReads() throws Exception {
    equal(0, VectoredRanges.merge(VectoredRanges.validateAndSort(ranges(), 10), 10, 10).size(), "empty");
  }
}

package s3commit.hadoop;

import java.io.EOFException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;

/**
 * Pure range arithmetic for vectored reads: validate, sort, and merge ranges that lie close together into
 * fewer, larger reads (Hadoop's {@code readVectored} contract; S3A's merge rule). No I/O, no Hadoop types,
 * so it compiles on every Hadoop version and is unit-tested on its own.
 */
final class VectoredRanges {
  private VectoredRanges() {
  }

  /** A requested range: its offset and length, and its index in the caller's list. */
  static final class Range {
    final long offset;
    final int length;
    final int index;

    Range(long offset, int length, int index) {
      this.offset = offset;
      this.length = length;
      this.index = index;
    }

    long end() {
      return offset + length;
    }
  }

  /** One read covering one or more requested ranges. */
  static final class Merged {
    final long offset;
    long end;
    final List<Range> parts = new ArrayList<>();

    Merged(Range first) {
      offset = first.offset;
      end = first.end();
      parts.add(first);
    }

    int length() {
      return (int) (end - offset);
    }
  }

  /**
   * The ranges sorted by offset; refuses a negative offset or length and overlapping ranges
   * ({@link IllegalArgumentException}) and, when the file's length is known, a range past its end
   * ({@link EOFException}).
   */
  static List<Range> validateAndSort(List<Range> ranges, long fileLength) throws EOFException {
    List<Range> sorted = new ArrayList<>(ranges);
    for (Range r : sorted) {
      if (r.offset < 0) {
        throw new EOFException("range " + r.index + " starts at a negative offset " + r.offset);
      }
      if (r.length < 0) {
        throw new IllegalArgumentException("range " + r.index + " has a negative length " + r.length);
      }
      if (fileLength >= 0 && r.end() > fileLength) {
        throw new EOFException("range " + r.index + " [" + r.offset + ", " + r.end() + ") goes past the end of "
            + "the file (" + fileLength + " bytes)");
      }
    }
    sorted.sort(Comparator.comparingLong((Range r) -> r.offset).thenComparingInt(r -> r.length));
    for (int i = 1; i < sorted.size(); i++) {
      Range previous = sorted.get(i - 1);
      Range current = sorted.get(i);
      if (current.offset < previous.end()) {
        throw new IllegalArgumentException("ranges overlap: [" + previous.offset + ", " + previous.end()
            + ") and [" + current.offset + ", " + current.end() + ")");
      }
    }
    return Collections.unmodifiableList(sorted);
  }

  /**
   * Sorted ranges merged into reads: a range joins the read before it when the gap between them is under
   * {@code minSeek} and the read stays within {@code maxMerged} bytes.
   */
  static List<Merged> merge(List<Range> sorted, int minSeek, int maxMerged) {
    List<Merged> merged = new ArrayList<>();
    Merged current = null;
    for (Range range : sorted) {
      if (current != null && range.offset - current.end < minSeek
          && range.end() - current.offset <= maxMerged) {
        current.end = Math.max(current.end, range.end());
        current.parts.add(range);
      } else {
        current = new Merged(range);
        merged.add(current);
      }
    }
    return merged;
  }
}

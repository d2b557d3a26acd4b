package s3commit.hadoop;

import org.apache.hadoop.fs.FileRange;
import org.apache.hadoop.fs.FileSystem;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.function.IntFunction;

/**
 * {@link S3InputStream} with Hadoop's vectored read ({@code PositionedReadable.readVectored}, Hadoop 3.3.5+;
 * compiled only against such jars and chosen by {@link S3FileSystem} when present).
 *
 * <p>The ranges are validated and sorted, those closer than {@code fs.s3a.vectored.read.min.seek.size} are
 * merged up to {@code fs.s3a.vectored.read.max.merged.size}, and each merged read is one ranged GET, all of
 * them in parallel. Every range's future completes as soon as the read holding it arrives, with a buffer
 * from the caller's allocator. The stream's position does not move.
 */
class S3VectoredInputStream extends S3InputStream {
  private final int minSeek;
  private final int maxMerged;

  S3VectoredInputStream(S3FileSystem fs, String location, long length, FileSystem.Statistics statistics,
      Options options, int minSeek, int maxMerged) {
    super(fs, location, length, statistics, options);
    this.minSeek = minSeek;
    this.maxMerged = maxMerged;
  }

  @Override
  public int minSeekForVectorReads() {
    return minSeek;
  }

  @Override
  public int maxReadSizeForVectorReads() {
    return maxMerged;
  }

  @Override
  public void readVectored(List<? extends FileRange> ranges, IntFunction<ByteBuffer> allocate)
      throws IOException {
    checkOpen();
    List<VectoredRanges.Range> requested = new ArrayList<>(ranges.size());
    for (int i = 0; i < ranges.size(); i++) {
      FileRange range = ranges.get(i);
      requested.add(new VectoredRanges.Range(range.getOffset(), range.getLength(), i));
    }
    List<VectoredRanges.Range> sorted = VectoredRanges.validateAndSort(requested, length);
    for (FileRange range : ranges) {
      range.setData(new CompletableFuture<>());
    }
    StreamCounters.VECTORED_RANGES.addAndGet(sorted.size());
    for (VectoredRanges.Merged read : VectoredRanges.merge(sorted, minSeek, maxMerged)) {
      StreamCounters.VECTORED_READS.incrementAndGet();
      FETCHERS.submit(() -> {
        try {
          byte[] data = fetch(read.offset, read.length());
          for (VectoredRanges.Range part : read.parts) {
            ByteBuffer buffer = allocate.apply(part.length);
            buffer.put(data, (int) (part.offset - read.offset), part.length);
            buffer.flip();
            ranges.get(part.index).getData().complete(buffer);
          }
        } catch (Throwable e) {
          for (VectoredRanges.Range part : read.parts) {
            ranges.get(part.index).getData().completeExceptionally(e);
          }
        }
      });
    }
  }

  @Override
  public boolean hasCapability(String capability) {
    return "in:readvectored".equals(capability.toLowerCase(Locale.ROOT)) || super.hasCapability(capability);
  }
}

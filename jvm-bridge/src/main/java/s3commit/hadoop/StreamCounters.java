package s3commit.hadoop;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What this JVM's {@code s3a://} streams did, by kind of fetch: blocks prefetched by sequential streams,
 * fetches of random reads, positioned reads, vectored reads (merged GETs and the ranges they served), and
 * parts handed to the sidecar. For diagnostics and tests ({@link S3FileSystem#streamCountersJson}).
 */
final class StreamCounters {
  static final AtomicLong SEQUENTIAL_BLOCKS = new AtomicLong();
  static final AtomicLong RANDOM_FETCHES = new AtomicLong();
  static final AtomicLong POSITIONED_FETCHES = new AtomicLong();
  static final AtomicLong VECTORED_READS = new AtomicLong();
  static final AtomicLong VECTORED_RANGES = new AtomicLong();
  static final AtomicLong BYTES_FETCHED = new AtomicLong();
  static final AtomicLong PARTS_HANDED_OVER = new AtomicLong();
  static final AtomicLong BLOCK_FILES = new AtomicLong();

  private StreamCounters() {
  }

  static Map<String, Long> snapshot() {
    Map<String, Long> out = new LinkedHashMap<>();
    out.put("sequential_blocks", SEQUENTIAL_BLOCKS.get());
    out.put("random_fetches", RANDOM_FETCHES.get());
    out.put("positioned_fetches", POSITIONED_FETCHES.get());
    out.put("vectored_reads", VECTORED_READS.get());
    out.put("vectored_ranges", VECTORED_RANGES.get());
    out.put("bytes_fetched", BYTES_FETCHED.get());
    out.put("parts_handed_over", PARTS_HANDED_OVER.get());
    out.put("block_files", BLOCK_FILES.get());
    return out;
  }
}

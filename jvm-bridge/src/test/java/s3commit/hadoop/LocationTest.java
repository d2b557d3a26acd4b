package s3commit.hadoop;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.apache.hadoop.fs.Path;
import org.junit.jupiter.api.Test;

import java.net.URI;

/** How a Hadoop path becomes the location the sidecar reads: {@code s3a://bucket/key}, the key decoded. */
final class LocationTest {
  /** A FileSystem for bucket {@code b} that needs no sidecar (only its naming is under test). */
  static final class Named extends S3FileSystem {
    @Override
    public URI getUri() {
      return URI.create("s3a://b");
    }

    @Override
    public Path getWorkingDirectory() {
      return new Path("s3a://b/work/dir");
    }
  }

  @Test
  void testPathsBecomeBucketAndDecodedKey() {
    S3FileSystem fs = new Named();
    assertEquals("s3a://b/t/part-00001.parquet", fs.location(new Path("s3a://b/t/part-00001.parquet")), "absolute");
    assertEquals("s3a://b/work/dir/rel/f", fs.location(new Path("rel/f")), "relative to the working directory");
    assertEquals("s3a://b/root", fs.location(new Path("/root")), "rooted");
    assertEquals("s3a://b/a b/c%d", fs.location(new Path("s3a://b/a b/c%d")), "spaces and percent signs decoded");
    assertEquals("s3a://b/day=2026-11-23/x", fs.location(new Path("s3a://b/day=2026-11-23/x")), "partition dirs");
  }
}

package s3commit.hadoop;

import static s3commit.testing.JavaTests.equal;

import org.apache.hadoop.fs.Path;

import java.net.URI;

/** How a Hadoop path becomes the location the sidecar reads: {@code s3a://bucket/key}, the key decoded. */
public final class LocationTest {
  private LocationTest() {
  }

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

  public static void testPathsBecomeBucketAndDecodedKey() {
    S3FileSystem fs = new Named();
    equal("s3a://b/t/part-00001.parquet", fs.location(new Path("s3a://b/t/part-00001.parquet")), "absolute");
    equal("s3a://b/work/dir/rel/f", fs.location(new Path("rel/f")), "relative to the working directory");
    equal("s3a://b/root", fs.location(new Path("/root")), "rooted");
    equal("s3a://b/a b/c%d", fs.location(new Path("s3a://b/a b/c%d")), "spaces and percent signs decoded");
    equal("s3a://b/day=2026-11-23/x", fs.location(new Path("s3a://b/day=2026-11-23/x")), "partition dirs");
  }
}

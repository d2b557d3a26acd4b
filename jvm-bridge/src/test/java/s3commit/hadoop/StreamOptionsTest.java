package s3commit.hadoop;

import static s3commit.testing.JavaTests.equal;
import static s3commit.testing.JavaTests.raises;

/** Read policies and buffer modes as configuration names them. */
public final class StreamOptionsTest {
  private StreamOptionsTest() {
  }

  public static void testTheFirstKnownPolicyInAListWins() {
    equal(S3InputStream.Policy.RANDOM, S3InputStream.Policy.parse("parquet, columnar, vector, random", null),
        "parquet's list");
    equal(S3InputStream.Policy.SEQUENTIAL, S3InputStream.Policy.parse("avro, sequential", null),
        "an unknown name is skipped");
    equal(S3InputStream.Policy.SEQUENTIAL, S3InputStream.Policy.parse("whole-file", null), "whole-file");
    equal(S3InputStream.Policy.NORMAL, S3InputStream.Policy.parse(" Adaptive ", null), "case and spaces");
    equal(S3InputStream.Policy.NORMAL, S3InputStream.Policy.parse("hbase", S3InputStream.Policy.NORMAL),
        "nothing known: the fallback");
    equal(S3InputStream.Policy.RANDOM, S3InputStream.Policy.parse(null, S3InputStream.Policy.RANDOM), "unset");
  }

  public static void testBufferModesAreS3AsNames() {
    equal(S3OutputStream.Buffer.DISK, S3OutputStream.Buffer.parse("disk"), "disk");
    equal(S3OutputStream.Buffer.DISK, S3OutputStream.Buffer.parse(null), "default");
    equal(S3OutputStream.Buffer.ARRAY, S3OutputStream.Buffer.parse("array"), "array");
    equal(S3OutputStream.Buffer.ARRAY, S3OutputStream.Buffer.parse("ByteBuffer"), "bytebuffer");
    IllegalArgumentException e = raises(IllegalArgumentException.class, () -> S3OutputStream.Buffer.parse("tape"),
        "unknown");
    equal(true, e.getMessage().contains("Valid values are: disk, array, bytebuffer"), "names the valid values");
  }

  public static void testMagicLengthsAreForgottenWhenTheirAttemptEnds() {
    String attempt = "s3a://b/t/__magic_job-j/job-j/00/tasks/attempt_1";
    S3FileSystem.recordMagicLength(attempt + "/__base/a.parquet", 10);
    S3FileSystem.recordMagicLength(attempt + "/__abs/x/__base/b.parquet", 20);
    S3FileSystem.recordMagicLength("s3a://b/t/__magic_job-j/job-j/00/tasks/attempt_10/__base/c", 30);
    equal(2, S3FileSystem.forgetMagic(attempt), "the attempt's two files, not attempt_10's");
    equal(1, S3FileSystem.forgetMagic("s3a://b/t/__magic_job-j/job-j/00/tasks/attempt_10"), "attempt_10");
  }

  public static void testMagicPathsAreRecognised() {
    equal(true, S3FileSystem.isMagic("s3a://b/t/__magic_job-1/job-1/00/tasks/a/__base/f"), "magic file");
    equal(false, S3FileSystem.isMagic("s3a://b/t/__magic_job-1/job-1/00/tasks/a/__base/f.pending"), "manifest");
    equal(false, S3FileSystem.isMagic("s3a://b/t/f"), "plain");
  }
}

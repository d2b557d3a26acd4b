package s3commit.hadoop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Read policies and buffer modes as configuration names them. */
final class StreamOptionsTest {
  @Test
  void testTheFirstKnownPolicyInAListWins() {
    assertEquals(S3InputStream.Policy.RANDOM, S3InputStream.Policy.parse("parquet, columnar, vector, random", null),
        "parquet's list");
    assertEquals(S3InputStream.Policy.SEQUENTIAL, S3InputStream.Policy.parse("avro, sequential", null),
        "an unknown name is skipped");
    assertEquals(S3InputStream.Policy.SEQUENTIAL, S3InputStream.Policy.parse("whole-file", null), "whole-file");
    assertEquals(S3InputStream.Policy.NORMAL, S3InputStream.Policy.parse(" Adaptive ", null), "case and spaces");
    assertEquals(S3InputStream.Policy.NORMAL, S3InputStream.Policy.parse("hbase", S3InputStream.Policy.NORMAL),
        "nothing known: the fallback");
    assertEquals(S3InputStream.Policy.RANDOM, S3InputStream.Policy.parse(null, S3InputStream.Policy.RANDOM), "unset");
  }

  @Test
  void testBufferModesAreS3AsNames() {
    assertEquals(S3OutputStream.Buffer.DISK, S3OutputStream.Buffer.parse("disk"), "disk");
    assertEquals(S3OutputStream.Buffer.DISK, S3OutputStream.Buffer.parse(null), "default");
    assertEquals(S3OutputStream.Buffer.ARRAY, S3OutputStream.Buffer.parse("array"), "array");
    assertEquals(S3OutputStream.Buffer.ARRAY, S3OutputStream.Buffer.parse("ByteBuffer"), "bytebuffer");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> S3OutputStream.Buffer.parse("tape"),
        "unknown");
    assertTrue(e.getMessage().contains("Valid values are: disk, array, bytebuffer"), "names the valid values");
  }

  @Test
  void testMagicLengthsAreForgottenWhenTheirAttemptEnds() {
    String attempt = "s3a://b/t/__magic_job-j/job-j/00/tasks/attempt_1";
    S3FileSystem.recordMagicLength(attempt + "/__base/a.parquet", 10);
    S3FileSystem.recordMagicLength(attempt + "/__abs/x/__base/b.parquet", 20);
    S3FileSystem.recordMagicLength("s3a://b/t/__magic_job-j/job-j/00/tasks/attempt_10/__base/c", 30);
    assertEquals(2, S3FileSystem.forgetMagic(attempt), "the attempt's two files, not attempt_10's");
    assertEquals(1, S3FileSystem.forgetMagic("s3a://b/t/__magic_job-j/job-j/00/tasks/attempt_10"), "attempt_10");
  }

  @Test
  void testMagicPathsAreRecognised() {
    assertTrue(S3FileSystem.isMagic("s3a://b/t/__magic_job-1/job-1/00/tasks/a/__base/f"), "magic file");
    assertFalse(S3FileSystem.isMagic("s3a://b/t/__magic_job-1/job-1/00/tasks/a/__base/f.pending"), "manifest");
    assertFalse(S3FileSystem.isMagic("s3a://b/t/f"), "plain");
  }
}

package s3commit.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol;
import org.junit.jupiter.api.Test;

import s3commit.bridge.S3Paths;
import s3commit.hadoop.SidecarJob;

import java.io.IOException;

/** How the bridge names things: destinations, Spark's file names, Hadoop jobs' ids. */
final class PathMappingTest {
  private static String destination(String path) {
    return new S3CommitProtocol("job-1", path, false).destination();
  }

  @Test
  void testDestinationsAreNormalisedToTheSidecarsForm() {
    assertEquals("s3://bucket/table", destination("s3a://bucket/table"), "s3a");
    assertEquals("s3://bucket/table", destination("s3a://bucket/table/"), "trailing slash");
    assertEquals("s3://bucket/a/b", destination("s3://bucket/a/b"), "s3");
    assertEquals("s3://bucket", destination("s3a://bucket/"), "bucket root");
    assertEquals("s3://bucket/with space", destination("s3a://bucket/with space"), "a decoded key");
  }

  @Test
  void testOtherDestinationsAreSparksOwnProtocols() {
    Configuration conf = new Configuration(false);
    S3CommitProtocol hdfs = new S3CommitProtocol("j", "hdfs://nn/table", false);
    assertNull(hdfs.destination(), "no S3 destination");
    assertInstanceOf(SQLHadoopMapReduceCommitProtocol.class, hdfs.sparkProtocol(conf), "Spark's default protocol");
    assertNotNull(new S3CommitProtocol("j", "file:/tmp/t", true).sparkProtocol(conf), "file");
    assertNull(new S3CommitProtocol("j", "s3a://b/t", false).sparkProtocol(conf), "S3 stays s3commit's");
    conf.set("fs.defaultFS", "file:///");
    assertNotNull(new S3CommitProtocol("j", "/tmp/t", false).sparkProtocol(conf), "no scheme: the default FS's");
    assertThrows(IllegalArgumentException.class, () -> new S3CommitProtocol("j", null, false), "null");
  }

  @Test
  void testSparkFileNamesCarryTheSplitAndTheJobId() {
    assertEquals("part-00003-6f1c.c000.snappy.parquet", S3Paths.partFileName("", 3, "6f1c", ".c000.snappy.parquet"),
        "flat");
    assertEquals("x-part-12345-j.txt", S3Paths.partFileName("x-", 12345, "j", ".txt"), "prefix");
  }

  @Test
  void testHadoopJobsUseTheTrackerIdOrAnExplicitUuid() throws IOException {
    Configuration conf = new Configuration(false);
    assertEquals("202611230102", SidecarJob.jobId(conf, new JobID("202611230102", 7)), "tracker part");
    assertEquals("202611230102", SidecarJob.jobId(conf, new JobID("202611230102", 3)), "same for driver and tasks");
    conf.set(SidecarJob.UUID_KEY, "explicit-uuid");
    assertEquals("explicit-uuid", SidecarJob.jobId(conf, new JobID("202611230102", 7)), "explicit");
    IOException e = assertThrows(IOException.class, () -> SidecarJob.jobId(new Configuration(false), null), "no JobID");
    assertTrue(e.getMessage().contains("FileOutputCommitterFactory"), "says what to do: " + e.getMessage());
  }

  @Test
  void testOnlyS3PathsGoThroughTheCommitters() {
    assertTrue(SidecarJob.isS3(new org.apache.hadoop.fs.Path("s3a://b/k")), "s3a");
    assertFalse(SidecarJob.isS3(new org.apache.hadoop.fs.Path("file:///tmp/k")), "file");
  }
}

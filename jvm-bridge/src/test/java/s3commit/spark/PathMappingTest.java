package s3commit.spark;

import static s3commit.testing.JavaTests.check;
import static s3commit.testing.JavaTests.equal;
import static s3commit.testing.JavaTests.raises;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol;

import s3commit.bridge.S3Paths;
import s3commit.hadoop.SidecarJob;

import java.io.IOException;

/** How the bridge names things: destinations, Spark's file names, Hadoop jobs' ids. */
public final class PathMappingTest {
  private PathMappingTest() {
  }

  private static String destination(String path) {
    return new S3CommitProtocol("job-1", path, false).destination();
  }

  public static void testDestinationsAreNormalisedToTheSidecarsForm() {
    equal("s3://bucket/table", destination("s3a://bucket/table"), "s3a");
    equal("s3://bucket/table", destination("s3a://bucket/table/"), "trailing slash");
    equal("s3://bucket/a/b", destination("s3://bucket/a/b"), "s3");
    equal("s3://bucket", destination("s3a://bucket/"), "bucket root");
    equal("s3://bucket/with space", destination("s3a://bucket/with space"), "a decoded key");
  }

  public static void testOtherDestinationsAreSparksOwnProtocols() {
    Configuration conf = new Configuration(false);
    S3CommitProtocol hdfs = new S3CommitProtocol("j", "hdfs://nn/table", false);
    equal(null, hdfs.destination(), "no S3 destination");
    check(hdfs.sparkProtocol(conf) instanceof SQLHadoopMapReduceCommitProtocol, "Spark's default protocol");
    check(new S3CommitProtocol("j", "file:/tmp/t", true).sparkProtocol(conf) != null, "file");
    equal(null, new S3CommitProtocol("j", "s3a://b/t", false).sparkProtocol(conf), "S3 stays s3commit's");
    conf.set("fs.defaultFS", "file:///");
    check(new S3CommitProtocol("j", "/tmp/t", false).sparkProtocol(conf) != null, "no scheme: the default FS's");
    raises(IllegalArgumentException.class, () -> new S3CommitProtocol("j", null, false), "null");
  }

  public static void testSparkFileNamesCarryTheSplitAndTheJobId() {
    equal("part-00003-6f1c.c000.snappy.parquet", S3Paths.partFileName("", 3, "6f1c", ".c000.snappy.parquet"),
        "flat");
    equal("x-part-12345-j.txt", S3Paths.partFileName("x-", 12345, "j", ".txt"), "prefix");
  }

  public static void testHadoopJobsUseTheTrackerIdOrAnExplicitUuid() throws IOException {
    Configuration conf = new Configuration(false);
    equal("202611230102", SidecarJob.jobId(conf, new JobID("202611230102", 7)), "tracker part");
    equal("202611230102", SidecarJob.jobId(conf, new JobID("202611230102", 3)), "same for driver and tasks");
    conf.set(SidecarJob.UUID_KEY, "explicit-uuid");
    equal("explicit-uuid", SidecarJob.jobId(conf, new JobID("202611230102", 7)), "explicit");
    IOException e = raises(IOException.class, () -> SidecarJob.jobId(new Configuration(false), null), "no JobID");
    check(e.getMessage().contains("FileOutputCommitterFactory"), "says what to do: " + e.getMessage());
  }

  public static void testOnlyS3PathsGoThroughTheCommitters() {
    check(SidecarJob.isS3(new org.apache.hadoop.fs.Path("s3a://b/k")), "s3a");
    check(!SidecarJob.isS3(new org.apache.hadoop.fs.Path("file:///tmp/k")), "file");
  }
}

package s3commit.spark;

import org.apache.hadoop.mapreduce.JobContext;
import org.apache.spark.internal.io.FileCommitProtocol;

/**
 * {@code spark.sql.sources.commitProtocolClass=s3commit.spark.S3CommitProtocol}. One source for both Scala lines:
 * it is written for Scala 2.13 (Spark 4.x), whose {@code FileCommitProtocol.commitJob} takes a
 * {@code scala.collection.immutable.Seq}; the build maps that type to 2.12's {@code scala.collection.Seq} for
 * Spark 3.5 ({@code s3commit.spark.scala_line_source}), the one thing that differs. Everything else is in
 * {@link S3CommitProtocolBase}, common to every Spark version (a destination outside S3 included: Spark's own
 * protocol commits it).
 */
public class S3CommitProtocol extends S3CommitProtocolBase {
  private static final long serialVersionUID = 1L;

  public S3CommitProtocol(String jobId, String path, boolean dynamicPartitionOverwrite) {
    super(jobId, path, dynamicPartitionOverwrite);
  }

  public S3CommitProtocol(String jobId, String path) {
    this(jobId, path, false);
  }

  @Override
  public void commitJob(JobContext context, scala.collection.immutable.Seq<TaskCommitMessage> taskCommits) {
    FileCommitProtocol other = sparkProtocol(context.getConfiguration());
    if (other != null) {
      other.commitJob(context, taskCommits);  // a destination outside S3: Spark's own protocol
      return;
    }
    commitJobWithMessages(context, taskCommits.iterator());
  }
}

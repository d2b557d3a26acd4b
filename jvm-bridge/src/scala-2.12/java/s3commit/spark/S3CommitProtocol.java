package s3commit.spark;

import org.apache.hadoop.mapreduce.JobContext;

/**
 * {@code spark.sql.sources.commitProtocolClass=s3commit.spark.S3CommitProtocol} for Spark 3.5 (Scala 2.12),
 * whose {@code FileCommitProtocol.commitJob} takes a {@code scala.collection.Seq}. Everything else is in
 * {@link S3CommitProtocolBase}, common to every Spark version.
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
  public void commitJob(JobContext context, scala.collection.Seq<TaskCommitMessage> taskCommits) {
    commitJobWithMessages(context, taskCommits.iterator());
  }
}

package s3commit.hadoop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.JobStatus;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.lib.output.PathOutputCommitter;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;

/**
 * s3commit's committer (magic, directory or partitioned: {@code fs.s3a.committer.name}) for Hadoop's new
 * {@code mapreduce} API, made by {@link S3CommitterFactory} for {@code s3a://} destinations: Spark's
 * {@code saveAsNewAPIHadoopFile} and {@code saveAsNewAPIHadoopDataset}, and any {@code FileOutputFormat}.
 *
 * <p>The output format writes each task's files under {@link #getWorkPath()}: a magic path in S3 (uploads
 * completed only at job commit) or, for staging, a local directory. Task commit saves the task's pendingset;
 * job commit completes every upload and writes the JSON {@code _SUCCESS}. Nothing is visible before the job
 * commits and nothing is copied. Every step is a request to this JVM's sidecar ({@link SidecarJob}).
 * Task commits are arbitrated by the engine (Spark's {@code HadoopMapReduceCommitProtocol} asks its
 * OutputCommitCoordinator before calling {@link #commitTask}).
 */
public class S3OutputCommitter extends PathOutputCommitter {
  private static final Logger LOG = LoggerFactory.getLogger(S3OutputCommitter.class);

  private final Path outputPath;
  private final SidecarJob job;
  private final TaskAttemptContext taskContext;

  public S3OutputCommitter(Path outputPath, TaskAttemptContext context) throws IOException {
    super(outputPath, context);
    this.outputPath = outputPath;
    this.job = new SidecarJob(outputPath);
    this.taskContext = context;
  }

  public S3OutputCommitter(Path outputPath, JobContext context) throws IOException {
    super(outputPath, context);
    this.outputPath = outputPath;
    this.job = new SidecarJob(outputPath);
    this.taskContext = null;
  }

  private static String jobId(JobContext context) throws IOException {
    return SidecarJob.jobId(context.getConfiguration(), context.getJobID());
  }

  private static String jobId(TaskAttemptContext context) throws IOException {
    return SidecarJob.jobId(context.getConfiguration(), context.getTaskAttemptID().getJobID());
  }

  private static String attempt(TaskAttemptContext context) {
    return context.getTaskAttemptID().toString();
  }

  @Override
  public Path getOutputPath() {
    return outputPath;
  }

  /** Where this task attempt's output format writes; null for a committer made for a job, not a task. */
  @Override
  public Path getWorkPath() throws IOException {
    if (taskContext == null) {
      return null;
    }
    Configuration conf = taskContext.getConfiguration();
    return new Path(job.workPath(conf, jobId(taskContext), attempt(taskContext)));
  }

  @Override
  public void setupJob(JobContext context) throws IOException {
    job.setupJob(context.getConfiguration(), jobId(context));
  }

  @Override
  public void commitJob(JobContext context) throws IOException {
    job.commitJob(context.getConfiguration(), jobId(context));
  }

  @Override
  public void abortJob(JobContext context, JobStatus.State state) throws IOException {
    job.abortJob(context.getConfiguration(), jobId(context));
  }

  /** Nothing left to clean after {@link #commitJob} or {@link #abortJob} (deprecated in Hadoop). */
  @Override
  @SuppressWarnings("deprecation")
  public void cleanupJob(JobContext context) {
  }

  @Override
  public void setupTask(TaskAttemptContext context) throws IOException {
    job.setupTask(context.getConfiguration(), jobId(context), attempt(context));
  }

  /** Always: an attempt with no files commits an empty pendingset, and its setup state is released. */
  @Override
  public boolean needsTaskCommit(TaskAttemptContext context) {
    return true;
  }

  @Override
  public void commitTask(TaskAttemptContext context) throws IOException {
    job.commitTask(context.getConfiguration(), jobId(context), attempt(context));
  }

  /**
   * Best effort, never throws: Spark calls it for an attempt its commit coordinator denied, then raises
   * {@code CommitDeniedException}, which an exception from here would replace.
   */
  @Override
  public void abortTask(TaskAttemptContext context) {
    try {
      job.abortTask(context.getConfiguration(), jobId(context), attempt(context));
    } catch (IOException | RuntimeException e) {
      LOG.warn("s3commit task abort of {} failed: {}", attempt(context), e.getMessage());
    }
  }

  @Override
  public boolean isRecoverySupported() {
    return false;
  }

  @Override
  public boolean isCommitJobRepeatable(JobContext context) {
    return false;
  }

  @Override
  public void recoverTask(TaskAttemptContext context) throws IOException {
    throw new IOException("s3commit cannot recover task " + attempt(context) + " from a previous job attempt");
  }

  @Override
  public String toString() {
    return "S3OutputCommitter{" + job.location() + "}";
  }
}

package s3commit.hadoop;

import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapred.FileOutputCommitter;
import org.apache.hadoop.mapred.FileOutputFormat;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapred.JobContext;
import org.apache.hadoop.mapred.TaskAttemptContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;

/**
 * s3commit's committer for Hadoop's old {@code mapred} API
 * ({@code mapred.output.committer.class=s3commit.hadoop.S3MapRedCommitter}): Spark's {@code saveAsTextFile},
 * {@code saveAsHadoopFile}, {@code saveAsSequenceFile} and {@code saveAsPickleFile}.
 *
 * <p>The old API has no committer factory: the committer is one class for every destination, and an output
 * format writes into a committer's work path only if that committer is a {@code mapred.FileOutputCommitter}
 * ({@code mapred.FileOutputFormat.getTaskOutputPath} asks {@link #getWorkPath(TaskAttemptContext, Path)}).
 * So this class extends it: for an {@code s3a://} or {@code s3://} output every lifecycle step is
 * s3commit's (through {@link SidecarJob}, as {@link S3OutputCommitter} does), and for any other output
 * (HDFS, local files) it is Hadoop's FileOutputCommitter unchanged.
 */
public class S3MapRedCommitter extends FileOutputCommitter {
  private static final Logger LOG = LoggerFactory.getLogger(S3MapRedCommitter.class);

  /** The s3commit job for this configuration's output, or null when the output is not in S3. */
  private static SidecarJob s3Job(JobConf conf) {
    Path output = FileOutputFormat.getOutputPath(conf);
    return SidecarJob.isS3(output) ? new SidecarJob(output) : null;
  }

  private static String jobId(JobContext context) throws IOException {
    return SidecarJob.jobId(context.getJobConf(), context.getJobID());
  }

  private static String jobId(TaskAttemptContext context) throws IOException {
    return SidecarJob.jobId(context.getJobConf(), context.getTaskAttemptID().getJobID());
  }

  private static String attempt(TaskAttemptContext context) {
    return context.getTaskAttemptID().toString();
  }

  @Override
  public Path getWorkPath(TaskAttemptContext context, Path outputPath) throws IOException {
    if (!SidecarJob.isS3(outputPath)) {
      return super.getWorkPath(context, outputPath);
    }
    SidecarJob job = new SidecarJob(outputPath);
    return new Path(job.workPath(context.getJobConf(), jobId(context), attempt(context)));
  }

  @Override
  public Path getTaskAttemptPath(TaskAttemptContext context) throws IOException {
    Path output = FileOutputFormat.getOutputPath(context.getJobConf());
    return SidecarJob.isS3(output) ? getWorkPath(context, output) : super.getTaskAttemptPath(context);
  }

  @Override
  public void setupJob(JobContext context) throws IOException {
    SidecarJob job = s3Job(context.getJobConf());
    if (job == null) {
      super.setupJob(context);
      return;
    }
    job.setupJob(context.getJobConf(), jobId(context));
  }

  @Override
  public void commitJob(JobContext context) throws IOException {
    SidecarJob job = s3Job(context.getJobConf());
    if (job == null) {
      super.commitJob(context);
      return;
    }
    // Writes the JSON _SUCCESS itself; Hadoop's 0-byte marker is never written for S3.
    job.commitJob(context.getJobConf(), jobId(context));
  }

  @Override
  @SuppressWarnings("deprecation")
  public void cleanupJob(JobContext context) throws IOException {
    if (s3Job(context.getJobConf()) == null) {
      super.cleanupJob(context);
    }
  }

  @Override
  public void abortJob(JobContext context, int runState) throws IOException {
    SidecarJob job = s3Job(context.getJobConf());
    if (job == null) {
      super.abortJob(context, runState);
      return;
    }
    job.abortJob(context.getJobConf(), jobId(context));
  }

  @Override
  public void setupTask(TaskAttemptContext context) throws IOException {
    SidecarJob job = s3Job(context.getJobConf());
    if (job == null) {
      super.setupTask(context);
      return;
    }
    job.setupTask(context.getJobConf(), jobId(context), attempt(context));
  }

  @Override
  public boolean needsTaskCommit(TaskAttemptContext context) throws IOException {
    // For S3 always: an attempt with no files commits an empty pendingset and releases its setup state.
    return s3Job(context.getJobConf()) != null || super.needsTaskCommit(context);
  }

  @Override
  public void commitTask(TaskAttemptContext context) throws IOException {
    SidecarJob job = s3Job(context.getJobConf());
    if (job == null) {
      super.commitTask(context);
      return;
    }
    job.commitTask(context.getJobConf(), jobId(context), attempt(context));
  }

  /** For S3, best effort and never throws (see {@link S3OutputCommitter#abortTask}). */
  @Override
  public void abortTask(TaskAttemptContext context) throws IOException {
    SidecarJob job = s3Job(context.getJobConf());
    if (job == null) {
      super.abortTask(context);
      return;
    }
    try {
      job.abortTask(context.getJobConf(), jobId(context), attempt(context));
    } catch (IOException | RuntimeException e) {
      LOG.warn("s3commit task abort of {} failed: {}", attempt(context), e.getMessage());
    }
  }

  @Override
  public boolean isRecoverySupported(JobContext context) throws IOException {
    return s3Job(context.getJobConf()) == null && super.isRecoverySupported(context);
  }

  @Override
  public boolean isCommitJobRepeatable(JobContext context) throws IOException {
    return s3Job(context.getJobConf()) == null && super.isCommitJobRepeatable(context);
  }

  @Override
  public void recoverTask(TaskAttemptContext context) throws IOException {
    if (s3Job(context.getJobConf()) != null) {
      throw new IOException("s3commit cannot recover task " + attempt(context) + " from a previous job attempt");
    }
    super.recoverTask(context);
  }
}

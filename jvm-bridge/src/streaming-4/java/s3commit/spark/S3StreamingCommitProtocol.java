package s3commit.spark;

import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.spark.internal.io.FileNameSpec;
import org.apache.spark.sql.execution.streaming.ManifestFileCommitProtocol;
import org.apache.spark.sql.execution.streaming.sinks.FileStreamSinkLog;
import org.apache.spark.sql.execution.streaming.sinks.SinkFileStatus;

import java.util.List;

/**
 * {@code spark.sql.streaming.commitProtocolClass=s3commit.spark.S3StreamingCommitProtocol}: the file sink's
 * batches committed so that a batch's data files stay pending uploads until the batch is in the sink's log
 * ({@link StreamingSinkJob} has the order and the recovery). A {@code ManifestFileCommitProtocol}, because
 * that is how the file sink hands over its log and batch id ({@code setupManifestOptions}); none of its
 * behaviour is used. Written against Spark 4.x's packages ({@code ...streaming.sinks}); for 3.5 the build maps
 * the imports to {@code ...streaming}. {@code commitJob} is declared for both Scala collections' {@code Seq}:
 * the one the Spark in use calls is the override.
 *
 * <p>A sink that is not on {@code s3a://} or {@code s3://} (the protocol is session-wide) is committed by
 * {@code ManifestFileCommitProtocol} itself, exactly as without s3commit: every method then calls its parent.
 */
public class S3StreamingCommitProtocol extends ManifestFileCommitProtocol {
  private static final long serialVersionUID = 1L;

  /** The sink's batches on S3; null for a sink on another file system (Spark's protocol, the parent, commits). */
  private final StreamingSinkJob job;
  private transient FileStreamSinkLog fileLog;

  public S3StreamingCommitProtocol(String jobId, String path) {
    super(jobId, path);
    this.job = StreamingSinkJob.isS3(path) ? new StreamingSinkJob(jobId, path) : null;
  }

  public S3StreamingCommitProtocol(String jobId, String path, boolean dynamicPartitionOverwrite) {
    this(jobId, path);
    if (dynamicPartitionOverwrite) {
      throw new IllegalArgumentException("a streaming file sink has no dynamic partition overwrite");
    }
  }

  @Override
  public void setupManifestOptions(FileStreamSinkLog log, long batchId) {
    super.setupManifestOptions(log, batchId);
    if (job != null) {
      this.fileLog = log;
      job.setBatch(batchId);
    }
  }

  /** The id of the magic job committing this batch ({@code b<batch>-<uuid>}). */
  public String s3commitJobId() {
    return job == null ? null : job.jobId();
  }

  @Override
  public void setupJob(JobContext context) {
    if (job == null) {
      super.setupJob(context);
      return;
    }
    if (fileLog == null) {
      throw new IllegalStateException("setupManifestOptions must be called before setupJob");
    }
    job.setupJob(context);
  }

  private boolean addToLog(List<StreamingSinkJob.CommittedFile> files) {
    long now = System.currentTimeMillis();
    long blockSize = 64L * 1024 * 1024;
    SinkFileStatus[] statuses = new SinkFileStatus[files.size()];
    for (int i = 0; i < statuses.length; i++) {
      StreamingSinkJob.CommittedFile f = files.get(i);
      statuses[i] = new SinkFileStatus(f.path, f.length, false, now, 1, blockSize, FileStreamSinkLog.ADD_ACTION());
    }
    return fileLog.add(job.batchId(), statuses);
  }

  public void commitJob(JobContext context, scala.collection.immutable.Seq<TaskCommitMessage> commits) {
    if (job == null) {
      super.commitJob(context, commits);
      return;
    }
    job.commitJob(context, commits.iterator(), this::addToLog);
  }

  public void commitJob(JobContext context, scala.collection.Seq<TaskCommitMessage> commits) {
    if (job == null) {
      commitJob(context, commits.toList());  // the parent's, through the overload every Spark compiles
      return;
    }
    job.commitJob(context, commits.iterator(), this::addToLog);
  }

  @Override
  public void abortJob(JobContext context) {
    if (job == null) {
      super.abortJob(context);
      return;
    }
    job.abortJob(context);
  }

  @Override
  public void onTaskCommit(TaskCommitMessage message) {
    if (job == null) {
      super.onTaskCommit(message);
      return;
    }
    // The driver learns the batch's files from the validated pendingsets, at commit.
  }

  @Override
  public void setupTask(TaskAttemptContext context) {
    if (job == null) {
      super.setupTask(context);
      return;
    }
    job.setupTask(context);
  }

  @Override
  public String newTaskTempFile(TaskAttemptContext context, scala.Option<String> dir, FileNameSpec spec) {
    if (job == null) {
      return super.newTaskTempFile(context, dir, spec);
    }
    return job.newTaskTempFile(context, dir, spec.prefix(), spec.suffix());
  }

  @Override
  public String newTaskTempFile(TaskAttemptContext context, scala.Option<String> dir, String ext) {
    if (job == null) {
      return super.newTaskTempFile(context, dir, ext);
    }
    return job.newTaskTempFile(context, dir, "", ext);
  }

  @Override
  public String newTaskTempFileAbsPath(TaskAttemptContext context, String absoluteDir, FileNameSpec spec) {
    if (job == null) {
      return super.newTaskTempFileAbsPath(context, absoluteDir, spec);
    }
    throw new UnsupportedOperationException("a streaming file sink writes no file outside its directory");
  }

  @Override
  public String newTaskTempFileAbsPath(TaskAttemptContext context, String absoluteDir, String ext) {
    if (job == null) {
      return super.newTaskTempFileAbsPath(context, absoluteDir, ext);
    }
    throw new UnsupportedOperationException("a streaming file sink writes no file outside its directory");
  }

  @Override
  public TaskCommitMessage commitTask(TaskAttemptContext context) {
    if (job == null) {
      return super.commitTask(context);
    }
    return job.commitTask(context);
  }

  @Override
  public void abortTask(TaskAttemptContext context) {
    if (job == null) {
      super.abortTask(context);
      return;
    }
    job.abortTask(context);
  }
}

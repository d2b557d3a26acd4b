package s3commit.spark;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.hadoop.fs.UnsupportedFileSystemException;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;

import s3commit.hadoop.CheckpointFiles;

import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.lang.reflect.InvocationTargetException;

/**
 * {@code spark.sql.streaming.checkpointFileManagerClass=s3commit.spark.S3CheckpointFileManager}. Written against
 * Spark 4.x's streaming packages ({@code ...execution.streaming.checkpointing}); for Spark 3.5, where they are all
 * in {@code ...execution.streaming}, the build maps the imports ({@code s3commit.spark.streaming_source}). Every
 * checkpoint file on s3commit's {@code s3a://} FileSystem is
 * written in place, atomically, with no rename ({@link CheckpointFiles}); without overwrite, with
 * {@code If-None-Match: *}. Paths on any other FileSystem get Spark's own manager, chosen as Spark chooses it.
 * Opening a file sink's log ({@code <sink>/_spark_metadata}) settles the batches an earlier run left
 * half-committed ({@link StreamingSinkJob#recover}).
 */
public class S3CheckpointFileManager implements CheckpointFileManager {
  private final Path path;
  private final CheckpointFiles files;
  private final CheckpointFileManager other;

  public S3CheckpointFileManager(Path path, Configuration conf) throws IOException {
    this.path = path;
    this.files = CheckpointFiles.forPath(path, conf);
    this.other = files == null ? sparkDefault(path, conf) : null;
    if (files != null && "_spark_metadata".equals(path.getName()) && path.getParent() != null) {
      StreamingSinkJob.recover(conf, files.qualify(path.getParent()), null);
    }
  }

  /** Spark's own choice: FileContext's manager, or the FileSystem's when there is no AbstractFileSystem. */
  private static CheckpointFileManager sparkDefault(Path path, Configuration conf) {
    try {
      return new FileContextBasedCheckpointFileManager(path, conf);
    } catch (RuntimeException e) {
      throw e;
    } catch (Exception e) {
      if (e instanceof UnsupportedFileSystemException) {
        return new FileSystemBasedCheckpointFileManager(path, conf);
      }
      throw new IllegalStateException("cannot manage the checkpoint files of " + path + ": " + e, e);
    }
  }

  /** A stream that publishes the file at close (one PUT, or an upload completed), or nothing on cancel. */
  static final class AtomicStream extends CheckpointFileManager.CancellableFSDataOutputStream {
    private final OutputStream stream;
    private boolean done;

    AtomicStream(OutputStream stream) {
      super(stream);
      this.stream = stream;
    }

    @Override
    public synchronized void close() throws IOException {
      if (!done) {
        done = true;
        super.close();
      }
    }

    @Override
    public synchronized void cancel() {
      if (!done) {
        done = true;
        CheckpointFiles.cancel(stream);
      }
    }
  }

  @Override
  public CheckpointFileManager.CancellableFSDataOutputStream createAtomic(Path p, boolean overwriteIfPossible) {
    if (files == null) {
      return other.createAtomic(p, overwriteIfPossible);
    }
    try {
      return new AtomicStream(files.createAtomic(p, overwriteIfPossible));
    } catch (IOException e) {
      throw new UncheckedIOException("could not create " + p + ": " + e.getMessage(), e);
    }
  }

  @Override
  public FSDataInputStream open(Path p) {
    if (files == null) {
      return other.open(p);
    }
    try {
      return files.open(p);
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  @Override
  public FileStatus[] list(Path p, PathFilter filter) {
    if (files == null) {
      return other.list(p, filter);
    }
    try {
      return files.list(p, filter);
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  @Override
  public void mkdirs(Path p) {
    if (files == null) {
      other.mkdirs(p);
    } else {
      files.mkdirs(p);
    }
  }

  @Override
  public boolean exists(Path p) {
    if (files == null) {
      return other.exists(p);
    }
    try {
      return files.exists(p);
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  @Override
  public void delete(Path p) {
    if (files == null) {
      other.delete(p);
      return;
    }
    try {
      files.delete(p);
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  @Override
  public boolean isLocal() {
    return files == null && other.isLocal();
  }

  @Override
  public Path createCheckpointDirectory() {
    return files == null ? other.createCheckpointDirectory() : files.qualify(path);
  }

  /**
   * Spark 4.x's {@code CheckpointFileManager.close()}, passed on to Spark's own manager. Spark 3.5's interface has
   * no {@code close()} (this one is then just a method), so it is called by name.
   */
  public void close() {
    if (other == null) {
      return;
    }
    try {
      other.getClass().getMethod("close").invoke(other);
    } catch (NoSuchMethodException e) {
      // Spark 3.5: nothing to close
    } catch (InvocationTargetException e) {
      throw e.getCause() instanceof RuntimeException ? (RuntimeException) e.getCause()
          : new IllegalStateException("could not close " + other + ": " + e.getCause(), e.getCause());
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("could not close " + other + ": " + e, e);
    }
  }

  /** Throw a checked exception unchanged (Scala callers expect Hadoop's IOExceptions as they are). */
  @SuppressWarnings("unchecked")
  private static <E extends Throwable> RuntimeException sneaky(Throwable e) throws E {
    throw (E) e;
  }
}

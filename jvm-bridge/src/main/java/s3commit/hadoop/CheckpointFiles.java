package s3commit.hadoop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Abortable;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;

import s3commit.bridge.Sidecar;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.OutputStream;
import java.util.Map;

/**
 * Checkpoint files on s3commit's {@code s3a://} FileSystem, written atomically with no rename and no temporary
 * object: the body of {@code s3commit.spark.S3CheckpointFileManager}, common to every Spark version (that class
 * only adapts it to the version's {@code CheckpointFileManager}).
 *
 * <ul>
 *   <li>{@link #createAtomic}: an {@link S3OutputStream} for the file itself. Nothing is visible until
 *   {@code close()}, which sends one PUT (a file smaller than a part) or completes the upload; without
 *   overwrite both carry {@code If-None-Match: *}, so a file that exists is never replaced: the close fails
 *   with {@code FileAlreadyExistsException}, which Spark's logs turn into "another query is using this
 *   checkpoint". {@link #cancel} aborts the upload: nothing was published, nothing is left.</li>
 *   <li>{@link #exists}: one LIST ({@code ckpt.exists}), for a file or a directory alike.</li>
 *   <li>{@link #mkdirs} does nothing: S3 has no directories, and a directory exists once it holds a file.
 *   {@link #list} of a directory that holds nothing yet is empty.</li>
 * </ul>
 */
public final class CheckpointFiles {
  private final S3FileSystem fs;
  private final S3OutputStream.Buffer buffer;

  private CheckpointFiles(S3FileSystem fs) {
    this.fs = fs;
    this.buffer = S3OutputStream.Buffer.parse(fs.getConf().get("fs.s3a.fast.upload.buffer", "disk"));
  }

  /** The checkpoint files under {@code path}, or null when its FileSystem is not s3commit's. */
  public static CheckpointFiles forPath(Path path, Configuration conf) throws IOException {
    FileSystem fs = path.getFileSystem(conf);
    return fs instanceof S3FileSystem ? new CheckpointFiles((S3FileSystem) fs) : null;
  }

  public FileSystem fileSystem() {
    return fs;
  }

  public String confId() {
    return fs.confId();
  }

  /** {@code s3a://bucket/key} of a path (its key decoded). */
  public String location(Path path) {
    return fs.location(path);
  }

  /** A stream whose bytes become the file at {@code close()}, atomically; see the class comment. */
  public OutputStream createAtomic(Path path, boolean overwriteIfPossible) throws IOException {
    return new S3OutputStream(fs, fs.location(path), buffer, !overwriteIfPossible);
  }

  /** Abandon a stream of {@link #createAtomic}: its upload is aborted, nothing is published. */
  public static void cancel(OutputStream stream) {
    ((Abortable) stream).abort();
  }

  public FSDataInputStream open(Path path) throws IOException {
    return fs.open(path);
  }

  public FileStatus[] list(Path path, PathFilter filter) throws IOException {
    try {
      return fs.listStatus(path, filter);
    } catch (FileNotFoundException e) {
      return new FileStatus[0];  // a directory nothing was written to yet
    }
  }

  public void mkdirs(Path path) {
    // S3 has no directories: one exists as soon as a file is written under it.
  }

  public boolean exists(Path path) throws IOException {
    Map<String, Object> args = fs.args(path);
    return Boolean.TRUE.equals(Sidecar.run("ckpt.exists", args).get("exists"));
  }

  public void delete(Path path) throws IOException {
    try {
      fs.delete(path, true);
    } catch (FileNotFoundException e) {
      // already gone
    }
  }

  public Path qualify(Path path) {
    return fs.makeQualified(path);
  }
}

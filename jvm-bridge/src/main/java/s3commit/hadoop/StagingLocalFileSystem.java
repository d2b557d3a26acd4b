package s3commit.hadoop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

import java.io.IOException;
import java.net.URI;
import java.util.EnumSet;

/**
 * Where a staging committer's Spark tasks write their output: the task's private local directory, through Hadoop's
 * raw local file system, named {@code s3commit-staging:///<local path>}.
 *
 * <p>A plain local path would be written through Hadoop's {@code LocalFileSystem}, which checksums every 512 bytes
 * into a {@code .crc} file beside the data and hands the disk writes of {@code io.file.buffer.size} (4 KiB): a
 * quarter of a million system calls per GiB and a CRC32 pass that nobody reads (the sidecar uploads the file and
 * ignores {@code .crc} files; S3 gets its own checksums). Here there are no checksum files and the writes are
 * buffered by at least {@link #BUFFER} bytes. Everything else (paths, listing, deleting) is the raw local file
 * system's.
 */
public class StagingLocalFileSystem extends RawLocalFileSystem {
  public static final String SCHEME = "s3commit-staging";
  /** The key that makes Hadoop's {@code Path.getFileSystem} find this class. */
  public static final String IMPL_KEY = "fs." + SCHEME + ".impl";
  static final URI NAME = URI.create(SCHEME + ":///");
  static final int BUFFER = 1024 * 1024;

  /**
   * A local directory ({@code file:///...}, as the sidecar names a staging task's work path, or an absolute path) in
   * this file system; any other location (an {@code s3a://} work path of the magic committer) as it is.
   */
  public static String pathFor(String location) {
    if (location.startsWith("file:///")) {
      return SCHEME + location.substring("file".length());
    }
    return location.startsWith("/") ? SCHEME + "://" + location : location;
  }

  /** Register this file system in {@code conf} (the job's, or a task's). */
  public static void register(Configuration conf) {
    conf.set(IMPL_KEY, StagingLocalFileSystem.class.getName());
  }

  @Override
  public URI getUri() {
    return NAME;
  }

  @Override
  public String getScheme() {
    return SCHEME;
  }

  private static int buffer(int bufferSize) {
    return Math.max(bufferSize, BUFFER);
  }

  @Override
  public FSDataOutputStream create(Path f, boolean overwrite, int bufferSize, short replication, long blockSize,
      Progressable progress) throws IOException {
    return super.create(f, overwrite, buffer(bufferSize), replication, blockSize, progress);
  }

  @Override
  public FSDataOutputStream create(Path f, FsPermission permission, boolean overwrite, int bufferSize,
      short replication, long blockSize, Progressable progress) throws IOException {
    return super.create(f, permission, overwrite, buffer(bufferSize), replication, blockSize, progress);
  }

  @Override
  public FSDataOutputStream createNonRecursive(Path f, FsPermission permission, boolean overwrite, int bufferSize,
      short replication, long blockSize, Progressable progress) throws IOException {
    return super.createNonRecursive(f, permission, overwrite, buffer(bufferSize), replication, blockSize, progress);
  }

  @Override
  public FSDataOutputStream createNonRecursive(Path f, FsPermission permission, EnumSet<CreateFlag> flags,
      int bufferSize, short replication, long blockSize, Progressable progress) throws IOException {
    return super.createNonRecursive(f, permission, flags, buffer(bufferSize), replication, blockSize, progress);
  }
}

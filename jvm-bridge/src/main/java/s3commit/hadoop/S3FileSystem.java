package s3commit.hadoop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

import s3commit.bridge.BridgeConf;
import s3commit.bridge.Sidecar;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A Hadoop {@link FileSystem} for {@code s3a://} served by the s3commit sidecar, so that a pip-installed
 * PySpark reads and writes S3 with no hadoop-aws jars.
 *
 * <p>Directories are implicit (key prefixes) plus empty {@code dir/} markers from {@link #mkdirs}. Writes
 * to a magic path ({@code .../__magic_job-<id>/...}) are deferred: the sidecar starts an upload for the
 * final key and records a {@code .pending} on close instead of completing; this JVM remembers each such
 * file's real length for {@link #getFileStatus} and the {@code header.x-hadoop-s3a-magic-data-length}
 * XAttr that Spark's write statistics read. {@link #rename} is copy + delete, file by file: it exists so
 * that Spark's default rename-based commit protocol can run here (it is the baseline s3commit replaces).
 * This class holds no S3 logic, retries or error translation: the sidecar owns them.
 */
public class S3FileSystem extends FileSystem {
  public static final String MAGIC_LENGTH_XATTR = "header.x-hadoop-s3a-magic-data-length";
  private static final Map<String, Long> MAGIC_LENGTHS = new ConcurrentHashMap<>();
  private static final int WRITE_CHUNK = 4 * 1024 * 1024;

  private URI uri;
  private Path workingDir;
  private String bucket;
  private String confId;
  private Sidecar sidecar;

  @Override
  public void initialize(URI name, Configuration conf) throws IOException {
    super.initialize(name, conf);
    setConf(conf);
    bucket = name.getAuthority();
    if (bucket == null || bucket.isEmpty()) {
      throw new IllegalArgumentException("no bucket in " + name);
    }
    uri = URI.create(name.getScheme() + "://" + bucket);
    workingDir = new Path(uri.toString() + "/");
    sidecar = Sidecar.get();
    confId = BridgeConf.register(sidecar, conf, bucket);
  }

  @Override
  public String getScheme() {
    return "s3a";
  }

  @Override
  public URI getUri() {
    return uri;
  }

  /** {@code s3a://bucket/key} with the key decoded (the sidecar splits it at the first '/'). */
  String location(Path path) {
    Path qualified = makeQualified(path);
    URI u = qualified.toUri();
    String key = u.getPath() == null ? "" : u.getPath();
    while (key.startsWith("/")) {
      key = key.substring(1);
    }
    return getScheme() + "://" + u.getAuthority() + "/" + key;
  }

  Map<String, Object> args(Path path) {
    Map<String, Object> args = new HashMap<>();
    args.put("conf_id", confId);
    args.put("path", location(path));
    return args;
  }

  Sidecar sidecar() {
    return sidecar;
  }

  String confId() {
    return confId;
  }

  static boolean isMagic(String location) {
    return location.contains("/__magic_job-") && !location.endsWith(".pending")
        && !location.endsWith(".pendingset");
  }

  static void recordMagicLength(String location, long length) {
    MAGIC_LENGTHS.put(location, length);
  }

  @Override
  public FSDataInputStream open(Path path, int bufferSize) throws IOException {
    FileStatus status = getFileStatus(path);
    if (status.isDirectory()) {
      throw new FileNotFoundException("cannot open a directory: " + path);
    }
    return new FSDataInputStream(new S3InputStream(this, path, status.getLen(), statistics));
  }

  @Override
  public FSDataOutputStream create(Path path, FsPermission permission, boolean overwrite, int bufferSize,
      short replication, long blockSize, Progressable progress) throws IOException {
    String location = location(path);
    if (!overwrite && !isMagic(location)) {
      try {
        if (getFileStatus(path).isFile()) {
          throw new FileAlreadyExistsException(path + " already exists");
        }
      } catch (FileNotFoundException e) {
        // free to create
      }
    }
    return new FSDataOutputStream(new S3OutputStream(this, location, WRITE_CHUNK), statistics);
  }

  @Override
  public FSDataOutputStream append(Path path, int bufferSize, Progressable progress) throws IOException {
    throw new UnsupportedOperationException("append is not supported on S3: " + path);
  }

  @Override
  public boolean rename(Path src, Path dst) throws IOException {
    Map<String, Object> args = new HashMap<>();
    args.put("conf_id", confId);
    args.put("src", location(src));
    args.put("dst", location(dst));
    return Boolean.TRUE.equals(sidecar.call("fs.rename", args).get("renamed"));
  }

  @Override
  public boolean delete(Path path, boolean recursive) throws IOException {
    Map<String, Object> args = args(path);
    args.put("recursive", recursive);
    return Boolean.TRUE.equals(sidecar.call("fs.delete", args).get("deleted"));
  }

  @Override
  @SuppressWarnings("unchecked")
  public FileStatus[] listStatus(Path path) throws IOException {
    List<Map<String, Object>> entries =
        (List<Map<String, Object>>) sidecar.call("fs.list", args(path)).get("entries");
    if (entries.isEmpty()) {
      FileStatus status = getFileStatus(path);
      return status.isFile() ? new FileStatus[] {status} : new FileStatus[0];
    }
    List<FileStatus> result = new ArrayList<>(entries.size());
    for (Map<String, Object> entry : entries) {
      result.add(toStatus(entry));
    }
    return result.toArray(new FileStatus[0]);
  }

  private FileStatus toStatus(Map<String, Object> entry) {
    boolean dir = Boolean.TRUE.equals(entry.get("dir"));
    long length = ((Number) entry.get("length")).longValue();
    long mtime = ((Number) entry.get("mtime")).longValue();
    String location = (String) entry.get("path");
    String key = location.substring(location.indexOf("://") + 3);
    key = key.contains("/") ? key.substring(key.indexOf('/') + 1) : "";
    Path p = new Path(uri.getScheme(), bucket, "/" + key);
    return new FileStatus(length, dir, 1, dir ? 0 : getDefaultBlockSize(p), mtime, p);
  }

  @Override
  public void setWorkingDirectory(Path dir) {
    workingDir = makeQualified(dir);
  }

  @Override
  public Path getWorkingDirectory() {
    return workingDir;
  }

  @Override
  public boolean mkdirs(Path path, FsPermission permission) throws IOException {
    if (location(path).contains("/__magic_job-")) {
      return true;  // nothing to create under a magic path: its "directories" are key prefixes
    }
    sidecar.call("fs.mkdirs", args(path));
    return true;
  }

  @Override
  public FileStatus getFileStatus(Path path) throws IOException {
    String location = location(path);
    Long magic = MAGIC_LENGTHS.get(location);
    if (magic != null) {
      return new FileStatus(magic, false, 1, getDefaultBlockSize(path), 0, makeQualified(path));
    }
    return toStatus(sidecar.call("fs.stat", args(path)).header);
  }

  @Override
  public byte[] getXAttr(Path path, String name) throws IOException {
    Long magic = MAGIC_LENGTHS.get(location(path));
    if (MAGIC_LENGTH_XATTR.equals(name) && magic != null) {
      return Long.toString(magic).getBytes(StandardCharsets.UTF_8);
    }
    return null;
  }

  @Override
  public long getDefaultBlockSize() {
    return getConf().getLongBytes("fs.s3a.block.size", 64L * 1024 * 1024);
  }

  @Override
  public long getDefaultBlockSize(Path path) {
    return getDefaultBlockSize();
  }
}

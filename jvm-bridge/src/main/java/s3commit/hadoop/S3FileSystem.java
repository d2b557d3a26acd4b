package s3commit.hadoop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.impl.AbstractFSBuilderImpl;
import org.apache.hadoop.fs.impl.OpenFileParameters;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

import s3commit.bridge.BridgeConf;
import s3commit.bridge.Ndjson;
import s3commit.bridge.S3Paths;
import s3commit.bridge.Sidecar;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.lang.reflect.Constructor;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

/**
 * A Hadoop {@link FileSystem} for {@code s3a://} served by the s3commit sidecar, so that a pip-installed
 * PySpark reads and writes S3 with no hadoop-aws jars.
 *
 * <p>Directories are implicit (key prefixes) plus empty {@code dir/} markers from {@link #mkdirs}. Reads go
 * through {@link S3InputStream} (S3A's input policies, prefetching, vectored reads where Hadoop has them; Spark's
 * shuffle files in decommissioning's fallback storage a block at a time, {@link S3InputStream.Options#forShuffleFiles});
 * writes through {@link S3OutputStream} (parts uploaded in the background by the sidecar). Writes to a
 * magic path ({@code .../__magic_job-<id>/...}) are deferred: the sidecar starts an upload for the final key
 * and records a {@code .pending} on close instead of completing; this JVM remembers each such file's real
 * length for {@link #getFileStatus} and the {@code header.x-hadoop-s3a-magic-data-length} XAttr that
 * Spark's write statistics read, until its task commits or aborts ({@link #forgetMagic}; at most
 * {@link #MAGIC_LIMIT} entries in any case). {@link #rename} is copy + delete, file by file: it exists so that
 * Spark's default rename-based commit protocol can run here (the baseline s3commit replaces). This class
 * holds no S3 logic, retries or error translation: the sidecar owns them. Every request goes to the JVM's
 * current sidecar, so a sidecar that died is replaced without the FileSystem noticing.
 */
public class S3FileSystem extends FileSystem {
  public static final String MAGIC_LENGTH_XATTR = "header.x-hadoop-s3a-magic-data-length";
  static final int MAGIC_LIMIT = 100_000;
  private static final Map<String, Long> MAGIC_LENGTHS = Collections.synchronizedMap(
      new LinkedHashMap<String, Long>(16, 0.75f, false) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Long> eldest) {
          return size() > MAGIC_LIMIT;
        }
      });
  private static final Set<String> OPEN_OPTIONS = Set.of("fs.option.openfile.read.policy",
      "fs.option.openfile.length", "fs.option.openfile.split.start", "fs.option.openfile.split.end",
      "fs.option.openfile.buffer.size", "fs.option.openfile.footer.cache", "fs.s3a.experimental.input.fadvise",
      "fs.s3a.readahead.range");
  private static final Constructor<?> VECTORED = vectoredStream();

  private URI uri;
  private Path workingDir;
  private String bucket;
  private String confId;
  private S3InputStream.Options readOptions;
  private S3OutputStream.Buffer buffer;
  private int minSeek;
  private int maxMerged;

  private static Constructor<?> vectoredStream() {
    try {
      return Class.forName("s3commit.hadoop.S3VectoredInputStream").getDeclaredConstructor(S3FileSystem.class,
          String.class, long.class, FileSystem.Statistics.class, S3InputStream.Options.class, int.class, int.class);
    } catch (ReflectiveOperationException | LinkageError e) {
      return null;  // built against a Hadoop without vectored reads
    }
  }

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
    confId = BridgeConf.register(conf, bucket);
    // Every option is parsed once, by the sidecar (s3commit.config): the same keys and defaults as Python's.
    Map<String, Object> streams = BridgeConf.streamOptions(confId);
    readOptions = new S3InputStream.Options(
        S3InputStream.Policy.parse((String) streams.get("read_policy"), S3InputStream.Policy.NORMAL),
        intOf(streams, "readahead"), intOf(streams, "prefetch_block_size"), intOf(streams, "prefetch_block_count"),
        intOf(streams, "prefetch_max_block_size"), ((Number) streams.get("prefetch_max_ahead")).longValue(), -1);
    buffer = S3OutputStream.Buffer.parse((String) streams.get("upload_buffer"));
    minSeek = intOf(streams, "vectored_min_seek");
    maxMerged = intOf(streams, "vectored_max_merged");
  }

  private static int intOf(Map<String, Object> options, String name) {
    return ((Number) options.get(name)).intValue();
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
    String key = u.getPath() == null ? "" : S3Paths.withoutLeadingSlashes(u.getPath());
    return "s3a://" + u.getAuthority() + "/" + key;  // the sidecar's spelling, whatever this FileSystem's scheme
  }

  Map<String, Object> args(String location) {
    Map<String, Object> args = new HashMap<>();
    args.put("conf_id", confId);
    args.put("path", location);
    return args;
  }

  Map<String, Object> args(Path path) {
    return args(location(path));
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

  /** Forget the lengths of magic files under {@code prefix} (a task attempt's work path, at its end). */
  public static int forgetMagic(String prefix) {
    String location = MagicTaskFileSystem.sidecarLocation(prefix);
    String p = location.endsWith("/") ? location : location + "/";
    synchronized (MAGIC_LENGTHS) {
      int before = MAGIC_LENGTHS.size();
      MAGIC_LENGTHS.keySet().removeIf(k -> k.startsWith(p));
      return before - MAGIC_LENGTHS.size();
    }
  }

  /** What this JVM's streams did, by kind of fetch (see {@link StreamCounters}), as JSON. */
  public static String streamCountersJson() throws IOException {
    return s3commit.bridge.FrameChannel.JSON.writeValueAsString(StreamCounters.snapshot());
  }

  /** How many magic file lengths this JVM remembers (bounded by {@link #MAGIC_LIMIT}). */
  public static int magicLengthsRemembered() {
    return MAGIC_LENGTHS.size();
  }

  // --- reads --------------------------------------------------------------------------------------

  @Override
  public FSDataInputStream open(Path path, int bufferSize) throws IOException {
    FileStatus status = getFileStatus(path);
    if (status.isDirectory()) {
      throw new FileNotFoundException("cannot open a directory: " + path);
    }
    String location = location(path);
    return new FSDataInputStream(newStream(location, status.getLen(), readOptionsFor(location)));
  }

  /** This file system's read options, or those of Spark's shuffle files for one of them. */
  private S3InputStream.Options readOptionsFor(String location) {
    return S3InputStream.isShuffleFile(location) ? readOptions.forShuffleFiles() : readOptions;
  }

  private S3InputStream newStream(String location, long length, S3InputStream.Options options) throws IOException {
    if (VECTORED != null) {
      try {
        return (S3InputStream) VECTORED.newInstance(this, location, length, statistics, options, minSeek,
            maxMerged);
      } catch (ReflectiveOperationException e) {
        throw new IOException("could not open " + location + ": " + e, e);
      }
    }
    return new S3InputStream(this, location, length, statistics, options);
  }

  /**
   * {@code openFile()}: the read policy ({@code fs.option.openfile.read.policy}), the length or status
   * (which saves the HEAD) and the split's end come from the builder's options.
   */
  @Override
  protected CompletableFuture<FSDataInputStream> openFileWithOptions(Path path, OpenFileParameters parameters)
      throws IOException {
    AbstractFSBuilderImpl.rejectUnknownMandatoryKeys(parameters.getMandatoryKeys(), OPEN_OPTIONS,
        "for " + path + " (s3commit's s3a:// FileSystem)");
    Configuration options = parameters.getOptions();
    String policies = options.get("fs.option.openfile.read.policy",
        options.get("fs.s3a.experimental.input.fadvise"));
    long splitEnd = options.getLong("fs.option.openfile.split.end", -1);
    S3InputStream.Options defaults = readOptionsFor(location(path));
    S3InputStream.Options read = policies == null && splitEnd < 0 ? defaults
        : readOptions.withPolicy(S3InputStream.Policy.parse(policies, defaults.policy), splitEnd);
    long length = options.getLong("fs.option.openfile.length", -1);
    FileStatus status = parameters.getStatus();
    if (status != null) {
      length = status.getLen();
    }
    if (length < 0) {
      FileStatus found = getFileStatus(path);
      if (found.isDirectory()) {
        throw new FileNotFoundException("cannot open a directory: " + path);
      }
      length = found.getLen();
    }
    return CompletableFuture.completedFuture(new FSDataInputStream(newStream(location(path), length, read)));
  }

  // --- writes -------------------------------------------------------------------------------------

  @Override
  public FSDataOutputStream create(Path path, FsPermission permission, boolean overwrite, int bufferSize,
      short replication, long blockSize, Progressable progress) throws IOException {
    String location = location(path);
    boolean magic = isMagic(location);
    if (!overwrite && !magic) {
      try {
        if (getFileStatus(path).isFile()) {
          throw new FileAlreadyExistsException(path + " already exists");
        }
      } catch (FileNotFoundException e) {
        // free to create; the upload completes with If-None-Match: * so a racing writer cannot be overwritten
      }
    }
    return new FSDataOutputStream(new S3OutputStream(this, location, buffer, !overwrite && !magic), statistics);
  }

  @Override
  public FSDataOutputStream append(Path path, int bufferSize, Progressable progress) throws IOException {
    throw new UnsupportedOperationException("append is not supported on S3: " + path);
  }

  // --- metadata -----------------------------------------------------------------------------------

  @Override
  public boolean rename(Path src, Path dst) throws IOException {
    Map<String, Object> args = new HashMap<>();
    args.put("conf_id", confId);
    args.put("src", location(src));
    args.put("dst", location(dst));
    return Boolean.TRUE.equals(Sidecar.run("fs.rename", args).get("renamed"));
  }

  @Override
  public boolean delete(Path path, boolean recursive) throws IOException {
    Map<String, Object> args = args(path);
    args.put("recursive", recursive);
    return Boolean.TRUE.equals(Sidecar.run("fs.delete", args).get("deleted"));
  }

  /** The entries of a directory, streamed by the sidecar page by page (one record per line). */
  @Override
  @SuppressWarnings("unchecked")
  public FileStatus[] listStatus(Path path) throws IOException {
    List<FileStatus> result = Sidecar.run("fs.list", args(path), null,
        (header, body) -> Ndjson.read(body, this::toStatus));
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
    Sidecar.run("fs.mkdirs", args(path));
    return true;
  }

  @Override
  public FileStatus getFileStatus(Path path) throws IOException {
    String location = location(path);
    Long magic = MAGIC_LENGTHS.get(location);
    if (magic != null) {
      return new FileStatus(magic, false, 1, getDefaultBlockSize(path), 0, makeQualified(path));
    }
    return toStatus(Sidecar.run("fs.stat", args(path)).header);
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

package s3commit.testing;

import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Method;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.function.IntFunction;

/**
 * Drives s3commit's {@code s3a://} FileSystem from a test in another process, one JSON command per line on
 * stdin, one JSON answer per line on stdout. The pytest suite uses it to check the streams against the bytes
 * it wrote (property tests of seek, read, readFully, positioned and vectored reads) and to write files
 * through {@code S3OutputStream} in both buffer modes. Bytes come back as a length and an MD5.
 *
 * <pre>
 *   {"cmd": "open", "path": ..., "policy": "random"|..., "openFile": true}   open a stream (one at a time)
 *   {"cmd": "op", "op": ["seek", 5]}   ["read", len] ["pread", pos, len] ["readFully", pos, len]
 *                                      ["readVectored", [[offset, length], ...]] ["getPos"] ["close"]
 *                                      ["skip", n] ["readLong"] ["readFullyHere", len] (DataInputStream's)
 *   {"cmd": "write", "path": ..., "chunks": [n, ...], "abortAfter": -1, "seed": 1}   write a file
 * </pre>
 * Configuration keys come from the environment variable {@code S3COMMIT_ORACLE_CONF} (a JSON object).
 */
public final class StreamOracle {
  private static final ObjectMapper JSON = new ObjectMapper();

  private StreamOracle() {
  }

  @SuppressWarnings("unchecked")
  public static void main(String[] args) throws Exception {
    Configuration conf = new Configuration(false);
    conf.set("fs.s3a.impl", "s3commit.hadoop.S3FileSystem");
    conf.setBoolean("fs.s3a.impl.disable.cache", true);
    Map<String, Object> keys = JSON.readValue(System.getenv("S3COMMIT_ORACLE_CONF"), Map.class);
    for (Map.Entry<String, Object> entry : keys.entrySet()) {
      conf.set(entry.getKey(), String.valueOf(entry.getValue()));
    }
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    FileSystem fs = null;
    FSDataInputStream stream = null;
    String line;
    while ((line = in.readLine()) != null) {
      Map<String, Object> command = JSON.readValue(line, Map.class);
      Map<String, Object> answer = new LinkedHashMap<>();
      try {
        String cmd = (String) command.get("cmd");
        if (fs == null && command.get("path") != null) {
          fs = FileSystem.get(URI.create((String) command.get("path")), conf);
        }
        switch (cmd) {
          case "open":
            if (stream != null) {
              stream.close();
            }
            stream = open(fs, command);
            answer.put("stream", stream.getWrappedStream().toString());
            break;
          case "op":
            op(stream, (List<Object>) command.get("op"), answer);
            break;
          case "write":
            write(fs, command, answer);
            break;
          default:
            throw new IllegalArgumentException("unknown command " + cmd);
        }
      } catch (Throwable e) {
        Throwable cause = e;
        while ((cause instanceof ExecutionException || cause instanceof java.lang.reflect.InvocationTargetException)
            && cause.getCause() != null) {
          cause = cause.getCause();
        }
        answer.put("error", cause.getClass().getSimpleName());
        answer.put("message", String.valueOf(cause.getMessage()));
      }
      System.out.println(JSON.writeValueAsString(answer));
      System.out.flush();
    }
  }

  private static FSDataInputStream open(FileSystem fs, Map<String, Object> command) throws Exception {
    Path path = new Path((String) command.get("path"));
    Object policy = command.get("policy");
    if (Boolean.TRUE.equals(command.get("openFile"))) {
      var builder = fs.openFile(path);
      if (policy != null) {
        builder.opt("fs.option.openfile.read.policy", (String) policy);
      }
      return builder.build().get();
    }
    return fs.open(path);
  }

  private static String md5(byte[] data, int offset, int length) throws Exception {
    MessageDigest digest = MessageDigest.getInstance("MD5");
    digest.update(data, offset, length);
    return HexFormat.of().formatHex(digest.digest());
  }

  @SuppressWarnings("unchecked")
  private static void op(FSDataInputStream stream, List<Object> op, Map<String, Object> answer) throws Exception {
    String name = (String) op.get(0);
    switch (name) {
      case "seek":
        stream.seek(((Number) op.get(1)).longValue());
        break;
      case "getPos":
        break;
      case "describe":
        answer.put("stream", stream.getWrappedStream().toString());
        break;
      case "read": {
        byte[] buffer = new byte[((Number) op.get(1)).intValue()];
        int n = stream.read(buffer, 0, buffer.length);
        answer.put("n", n);
        answer.put("md5", md5(buffer, 0, Math.max(n, 0)));
        break;
      }
      case "pread": {
        byte[] buffer = new byte[((Number) op.get(2)).intValue()];
        int n = stream.read(((Number) op.get(1)).longValue(), buffer, 0, buffer.length);
        answer.put("n", n);
        answer.put("md5", md5(buffer, 0, Math.max(n, 0)));
        break;
      }
      case "readFully": {
        byte[] buffer = new byte[((Number) op.get(2)).intValue()];
        stream.readFully(((Number) op.get(1)).longValue(), buffer);
        answer.put("n", buffer.length);
        answer.put("md5", md5(buffer, 0, buffer.length));
        break;
      }
      case "readVectored":
        answer.put("ranges", vectored(stream, (List<List<Number>>) op.get(1)));
        break;
      case "skip":  // InputStream.skip, as DataInputStream.skip calls it
        answer.put("n", stream.skip(((Number) op.get(1)).longValue()));
        break;
      case "readLong":  // DataInputStream.readLong: 8 bytes from the stream's position
        answer.put("value", stream.readLong());
        break;
      case "readFullyHere": {  // DataInputStream.readFully(byte[]): from the stream's position, moving it
        byte[] buffer = new byte[((Number) op.get(1)).intValue()];
        stream.readFully(buffer);
        answer.put("n", buffer.length);
        answer.put("md5", md5(buffer, 0, buffer.length));
        break;
      }
      case "close":
        stream.close();
        break;
      default:
        throw new IllegalArgumentException("unknown op " + name);
    }
    answer.put("pos", stream.getPos());
  }

  /** Hadoop's readVectored, by reflection (the oracle compiles against Hadoop 3.3.4 too). */
  @SuppressWarnings("unchecked")
  private static List<Object> vectored(FSDataInputStream stream, List<List<Number>> requested) throws Exception {
    Class<?> fileRange = Class.forName("org.apache.hadoop.fs.FileRange");
    Method create = fileRange.getMethod("createFileRange", long.class, int.class);
    List<Object> ranges = new ArrayList<>();
    for (List<Number> r : requested) {
      ranges.add(create.invoke(null, r.get(0).longValue(), r.get(1).intValue()));
    }
    IntFunction<ByteBuffer> allocate = ByteBuffer::allocate;
    stream.getClass().getMethod("readVectored", List.class, IntFunction.class).invoke(stream, ranges, allocate);
    List<Object> results = new ArrayList<>();
    for (Object range : ranges) {
      ByteBuffer data = ((CompletableFuture<ByteBuffer>) fileRange.getMethod("getData").invoke(range)).get();
      byte[] bytes = new byte[data.remaining()];
      data.get(bytes);
      Map<String, Object> result = new HashMap<>();
      result.put("n", bytes.length);
      result.put("md5", md5(bytes, 0, bytes.length));
      results.add(result);
    }
    return results;
  }

  @SuppressWarnings("unchecked")
  private static void write(FileSystem fs, Map<String, Object> command, Map<String, Object> answer)
      throws Exception {
    List<Number> chunks = (List<Number>) command.get("chunks");
    int abortAfter = ((Number) command.getOrDefault("abortAfter", -1)).intValue();
    java.util.Random random = new java.util.Random(((Number) command.getOrDefault("seed", 1)).longValue());
    MessageDigest digest = MessageDigest.getInstance("MD5");
    long written = 0;
    FSDataOutputStream out = fs.create(new Path((String) command.get("path")), true);
    for (int i = 0; i < chunks.size(); i++) {
      if (i == abortAfter) {
        out.abort();
        answer.put("aborted", true);
        return;
      }
      byte[] chunk = new byte[chunks.get(i).intValue()];
      random.nextBytes(chunk);
      digest.update(chunk);
      out.write(chunk);
      written += chunk.length;
    }
    out.close();
    answer.put("n", written);
    answer.put("md5", HexFormat.of().formatHex(digest.digest()));
  }
}

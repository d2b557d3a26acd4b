package s3commit.bridge;

import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.ClosedByInterruptException;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.TimeUnit;

/**
 * The JVM's handle on its Python sidecar ({@code python -m s3commit.bridge}): starts it lazily, once per
 * JVM, and sends it requests over a Unix domain socket.
 *
 * <p>Each request is a length-prefixed JSON header plus an optional binary payload (part data, file
 * ranges); see {@code s3commit/bridge/protocol.py}. Connections are pooled so that many task threads can call
 * at once. This class holds no S3 logic and no retry policy: the sidecar's store owns both. Errors come
 * back as {@link IOException}s (a {@link FileNotFoundException} for a missing object) carrying the Python
 * message.
 */
public final class Sidecar {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String TOKEN_ENV = "S3COMMIT_BRIDGE_TOKEN";
  private static Sidecar instance;

  private final Process process;
  private final Path socket;
  private final String token;
  private final String pythonVersion;
  private final ConcurrentLinkedDeque<Connection> idle = new ConcurrentLinkedDeque<>();

  /** A response: the JSON header and the payload bytes (empty if none). */
  public static final class Response {
    public final Map<String, Object> header;
    public final byte[] payload;

    Response(Map<String, Object> header, byte[] payload) {
      this.header = header;
      this.payload = payload;
    }

    public Object get(String key) {
      return header.get(key);
    }
  }

  private Sidecar(Process process, Path socket, String token, String pythonVersion) {
    this.process = process;
    this.socket = socket;
    this.token = token;
    this.pythonVersion = pythonVersion;
  }

  /** The version of this jar (written into the jar when it is built). */
  public static String jarVersion() {
    Properties properties = new Properties();
    try (InputStream in = Sidecar.class.getResourceAsStream("/s3commit-bridge.properties")) {
      if (in != null) {
        properties.load(in);
      }
    } catch (IOException e) {
      // fall through: an unknown version fails the handshake with a clear message
    }
    return properties.getProperty("version", "unknown");
  }

  /** The sidecar of this JVM, started on first use (and again if it died). */
  public static synchronized Sidecar get() throws IOException {
    if (instance == null || !instance.process.isAlive()) {
      instance = start();
    }
    return instance;
  }

  private static String python() {
    for (String name : new String[] {"S3COMMIT_PYTHON", "PYSPARK_PYTHON"}) {
      String value = System.getenv(name);
      if (value != null && !value.isEmpty()) {
        return value;
      }
    }
    String property = System.getProperty("s3commit.python");
    return property != null && !property.isEmpty() ? property : "python3";
  }

  private static Sidecar start() throws IOException {
    String python = python();
    byte[] secret = new byte[32];
    new SecureRandom().nextBytes(secret);
    String token = HexFormat.of().formatHex(secret);
    ProcessBuilder builder = new ProcessBuilder(python, "-m", "s3commit.bridge");
    builder.environment().put(TOKEN_ENV, token);
    builder.redirectError(ProcessBuilder.Redirect.INHERIT);
    Process process;
    try {
      process = builder.start();
    } catch (IOException e) {
      throw new IOException("could not start the s3commit sidecar with Python '" + python + "' (set "
          + "PYSPARK_PYTHON or S3COMMIT_PYTHON to a Python that has s3commit installed): " + e.getMessage(), e);
    }
    // Our end of its stdin stays open for the life of this JVM: when the JVM goes, the sidecar sees EOF.
    BufferedReader stdout = new BufferedReader(new InputStreamReader(process.getInputStream(),
        StandardCharsets.UTF_8));
    String line = stdout.readLine();
    if (line == null) {
      int code = waitFor(process);
      throw new IOException("the s3commit sidecar (" + python + " -m s3commit.bridge) exited with code " + code
          + " before it was ready; is s3commit installed for that Python? (its error is in the log above)");
    }
    Map<String, Object> ready = JSON.readValue(line, Map.class);
    if (ready.containsKey("error")) {
      throw new IOException("the s3commit sidecar refused to start: " + ready.get("error"));
    }
    Sidecar sidecar = new Sidecar(process, Path.of((String) ready.get("socket")), token,
        String.valueOf(ready.get("version")));
    Runtime.getRuntime().addShutdownHook(new Thread(process::destroy, "s3commit-sidecar-stop"));
    // Fail now, with both versions named, rather than on the first task.
    sidecar.release(sidecar.connect());
    return sidecar;
  }

  private static int waitFor(Process process) {
    try {
      process.waitFor(10, TimeUnit.SECONDS);
      return process.isAlive() ? -1 : process.exitValue();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return -1;
    }
  }

  /**
   * The S3 requests this JVM's sidecar has made so far, by operation, with the bytes uploaded and copied
   * server-side, as JSON (counted at the client; a retried request counts once per attempt). For tools
   * and demos reading the cost of a write from Python, e.g. through py4j.
   */
  public static String countersJson() throws IOException {
    return JSON.writeValueAsString(get().call("stats", Map.of()).header);
  }

  /** The sidecar's process id, for diagnostics. */
  public long pid() {
    return process.pid();
  }

  /** The Python package version the sidecar reported. */
  public String pythonVersion() {
    return pythonVersion;
  }

  /** Send one request; wait for its response. */
  public Response call(String op, Map<String, Object> args, byte[] payload) throws IOException {
    Map<String, Object> header = new LinkedHashMap<>(args);
    header.put("op", op);
    Connection connection = idle.pollFirst();
    if (connection == null) {
      connection = connect();
    }
    Response response;
    try {
      connection.send(header, payload);
      response = connection.receive();
    } catch (IOException e) {
      connection.close();
      String cause = e instanceof ClosedByInterruptException
          ? "the calling thread was interrupted (Spark cancelled the task)"
          : e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName();
      throw new IOException("s3commit sidecar request " + op + " failed: " + cause, e);
    }
    release(connection);
    if (!Boolean.TRUE.equals(response.header.get("ok"))) {
      throw toException(op, response.header);
    }
    return response;
  }

  public Response call(String op, Map<String, Object> args) throws IOException {
    return call(op, args, null);
  }

  /**
   * A clean-up request (an abort): sent even when the calling thread has been interrupted, as Spark does to
   * the tasks it cancels, which must still abort their uploads. The interrupt status is restored after.
   */
  public Response cleanup(String op, Map<String, Object> args) throws IOException {
    boolean interrupted = Thread.interrupted();
    try {
      return call(op, args, null);
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private void release(Connection connection) {
    idle.offerFirst(connection);
  }

  @SuppressWarnings("unchecked")
  private static IOException toException(String op, Map<String, Object> header) {
    Map<String, Object> error = (Map<String, Object>) header.getOrDefault("error", new HashMap<>());
    String type = String.valueOf(error.get("type"));
    String message = String.valueOf(error.get("message"));
    switch (type) {
      case "FileNotFound":
        return new FileNotFoundException(message);
      case "FileAlreadyExists":
        return new org.apache.hadoop.fs.FileAlreadyExistsException(message);
      case "IllegalArgument":
        return new IOException(new IllegalArgumentException(message).getMessage(),
            new IllegalArgumentException(message));
      default:
        return new IOException(message);
    }
  }

  private Connection connect() throws IOException {
    SocketChannel channel = SocketChannel.open(StandardProtocolFamily.UNIX);
    channel.connect(UnixDomainSocketAddress.of(socket));
    Connection connection = new Connection(channel);
    Map<String, Object> hello = new LinkedHashMap<>();
    hello.put("op", "hello");
    hello.put("token", token);
    hello.put("version", jarVersion());
    connection.send(hello, null);
    Response response = connection.receive();
    if (!Boolean.TRUE.equals(response.header.get("ok"))) {
      connection.close();
      throw toException("hello", response.header);
    }
    return connection;
  }

  /** One socket to the sidecar; used by one thread at a time. */
  private static final class Connection {
    private final SocketChannel channel;
    private final DataInputStream in;
    private final DataOutputStream out;

    Connection(SocketChannel channel) {
      this.channel = channel;
      this.in = new DataInputStream(new java.io.BufferedInputStream(Channels.newInputStream(channel), 1 << 16));
      OutputStream raw = Channels.newOutputStream(channel);
      this.out = new DataOutputStream(new java.io.BufferedOutputStream(raw, 1 << 16));
    }

    void send(Map<String, Object> header, byte[] payload) throws IOException {
      Map<String, Object> h = header;
      if (payload != null && payload.length > 0) {
        h = new LinkedHashMap<>(header);
        h.put("payload", payload.length);
      }
      byte[] body = JSON.writeValueAsBytes(h);
      out.writeInt(body.length);
      out.write(body);
      if (payload != null && payload.length > 0) {
        out.write(payload);
      }
      out.flush();
    }

    @SuppressWarnings("unchecked")
    Response receive() throws IOException {
      int length = in.readInt();
      byte[] body = new byte[length];
      in.readFully(body);
      Map<String, Object> header = JSON.readValue(body, Map.class);
      Object size = header.get("payload");
      byte[] payload = new byte[size == null ? 0 : ((Number) size).intValue()];
      in.readFully(payload);
      return new Response(header, payload);
    }

    void close() {
      try {
        channel.close();
      } catch (IOException e) {
        // already broken
      }
    }
  }
}

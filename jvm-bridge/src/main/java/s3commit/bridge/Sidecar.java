package s3commit.bridge;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedByInterruptException;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

/**
 * The JVM's handle on its Python sidecar ({@code python -m s3commit.bridge}): starts it lazily, once per
 * JVM, sends it requests over a Unix domain socket, and starts a new one if it dies.
 *
 * <p>Requests and responses are a JSON header plus an optional body streamed in bounded frames
 * ({@link FrameChannel}). Connections are pooled so that many task threads can call at once. This class
 * holds no S3 logic and no retry policy for S3: the sidecar's store owns both.
 *
 * <p><b>When the sidecar dies</b> (killed by the OOM killer, say), the next request finds it gone and starts
 * a new one. The new sidecar knows nothing: {@link #run} registers the caller's configuration again when
 * the sidecar answers {@code UnknownConfiguration}, and sends a request again on the new sidecar when
 * repeating it is safe (the operations the sidecar's table, {@code s3commit/bridge/operations.json}, marks
 * restartable: stateless reads and metadata, setups, aborts, and the job commit, which resumes from its
 * journal; the sidecar sends that table in its hello, so this class keeps no copy). A request that depended on
 * the dead sidecar's state (writing a file, committing a task) fails with a {@link SidecarDiedException} naming
 * the operation and the exit status, and Spark retries the task. Streams pin the sidecar that opened them
 * ({@link #exchange}), so a handle of a dead sidecar is never sent to its successor.
 *
 * <p>This class is the sidecar's lifecycle (start, restart, stop) and the calls the rest of the bridge makes;
 * {@link SidecarProcess} starts one process, {@link SidecarConnections} speaks to it (the hello, the pooled
 * connections, one request's exchange and its time limit) and {@link SidecarOperations} holds what the last hello
 * said of the operations.
 */
public final class Sidecar {
  private static final Logger LOG = LoggerFactory.getLogger(Sidecar.class);
  private static Sidecar instance;
  private static int generations;

  private final Process process;
  private final String pythonVersion;
  private final String blocksDir;
  private final int generation;
  private final SidecarConnections connections;

  /** A response: the JSON header and the body bytes (empty if none). */
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

  /** Writes a request's body (it may be asked to write it again, on a new sidecar). */
  public interface RequestBody {
    void write(FrameChannel channel) throws IOException;
  }

  /** Reads a response (its header, and its body, if any, as a stream of frames). */
  public interface ResponseHandler<T> {
    T handle(Map<String, Object> header, FrameChannel.Body body) throws IOException;
  }

  /** The sidecar this request went to died before answering. */
  public static final class SidecarDiedException extends IOException {
    private static final long serialVersionUID = 1L;

    SidecarDiedException(String message, Throwable cause) {
      super(message, cause);
    }
  }

  /** The sidecar does not know the configuration id (it is new, or it forgot): register it again. */
  public static final class UnknownConfigurationException extends IOException {
    private static final long serialVersionUID = 1L;

    UnknownConfigurationException(String message) {
      super(message);
    }
  }

  private Sidecar(SidecarProcess launched, int generation) {
    this.process = launched.process;
    this.pythonVersion = launched.pythonVersion;
    this.blocksDir = launched.blocksDir;
    this.generation = generation;
    this.connections = new SidecarConnections(launched.process, launched.socket, launched.token);
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

  /** The sidecar of this JVM, started on first use and again whenever the last one died. */
  public static synchronized Sidecar get() throws IOException {
    if (instance == null || !instance.process.isAlive()) {
      if (instance != null) {
        LOG.warn("the s3commit sidecar (pid {}) is gone ({}); starting a new one", instance.pid(),
            SidecarProcess.exitDescription(instance.process));
        instance.connections.closeAll();
      }
      instance = start(++generations);
    }
    return instance;
  }

  /** How many sidecars this JVM has started (a restart after a crash makes it 2). */
  public static synchronized int generations() {
    return generations;
  }

  private static Sidecar start(int generation) throws IOException {
    Sidecar sidecar = new Sidecar(SidecarProcess.launch(), generation);
    if (generation == 1) {
      try {
        Runtime.getRuntime().addShutdownHook(new Thread(Sidecar::stopCurrent, "s3commit-sidecar-stop"));
      } catch (IllegalStateException e) {
        // The JVM is shutting down and a shutdown hook needs S3 (Spark's, emptying decommissioning's fallback
        // storage when the application ends without stopping its context): serve it. The sidecar exits with the
        // JVM anyway, when the pipe the JVM holds closes.
      }
    }
    // Fail now, with both versions named, rather than on the first task.
    sidecar.connections.handshake();
    return sidecar;
  }

  private static synchronized void stopCurrent() {
    if (instance != null) {
      instance.process.destroy();
    }
  }

  /**
   * The S3 requests this JVM's sidecar has made so far, by operation, with the bytes uploaded and copied
   * server-side, as JSON (counted at the client; a retried request counts once per attempt). For tools
   * and demos reading the cost of a write from Python, e.g. through py4j.
   */
  public static String countersJson() throws IOException {
    return FrameChannel.JSON.writeValueAsString(run("stats", Map.of()).header);
  }

  /** What the sidecar holds now (configurations, write handles, threads, RSS), as JSON. */
  public static String healthJson() throws IOException {
    return FrameChannel.JSON.writeValueAsString(run("health", Map.of()).header);
  }

  /** The sidecar's process id, for diagnostics. */
  public long pid() {
    return process.pid();
  }

  /** The process of the current sidecar (for tests and tools that measure or stop it). */
  public Process process() {
    return process;
  }

  public boolean isAlive() {
    return process.isAlive();
  }

  public int generation() {
    return generation;
  }

  /** The Python package version the sidecar reported. */
  public String pythonVersion() {
    return pythonVersion;
  }

  /** The private directory where this sidecar accepts block files by default. */
  public String blocksDir() {
    return blocksDir;
  }

  // --- requests -------------------------------------------------------------------------------------

  /**
   * Send a request to whichever sidecar is current, registering its configuration again or moving to a new
   * sidecar as the class comment describes; the body (if any) is written again for a new sidecar.
   */
  public static <T> T run(String op, Map<String, Object> args, RequestBody body, ResponseHandler<T> handler)
      throws IOException {
    boolean reregistered = false;
    boolean restarted = false;
    while (true) {
      Sidecar sidecar = get();
      try {
        return sidecar.exchange(op, args, body, handler);
      } catch (UnknownConfigurationException e) {
        if (reregistered || !BridgeConf.reregister(String.valueOf(args.get("conf_id")))) {
          throw e;
        }
        reregistered = true;
      } catch (SidecarDiedException e) {
        if (restarted || !SidecarOperations.isRestartable(op)) {
          throw e;
        }
        restarted = true;
        LOG.warn("{}; sending {} again to a new sidecar", e.getMessage(), op);
      }
    }
  }

  /** {@link #run} for a request without a body; a response body is collected into the payload. */
  public static Response run(String op, Map<String, Object> args) throws IOException {
    return run(op, args, null, Sidecar::collect);
  }

  /** {@link #run} with a request body from memory. */
  public static Response run(String op, Map<String, Object> args, byte[] body) throws IOException {
    return run(op, args, body == null ? null : channel -> {
      channel.writeData(ByteBuffer.wrap(body));
      channel.endBody();
    }, Sidecar::collect);
  }

  /**
   * {@link #exchange} on this sidecar, registering the request's configuration again if the sidecar does not
   * know it (for requests that must reach this sidecar: those naming one of its write handles follow).
   */
  public <T> T request(String op, Map<String, Object> args, RequestBody body, ResponseHandler<T> handler)
      throws IOException {
    try {
      return exchange(op, args, body, handler);
    } catch (UnknownConfigurationException e) {
      if (!BridgeConf.reregister(String.valueOf(args.get("conf_id")))) {
        throw e;
      }
      return exchange(op, args, body, handler);
    }
  }

  /**
   * Runs a request whose outcome the caller must know even if its thread is interrupted (a job commit): an
   * interrupt that breaks the wait sends the request again, with the interrupt status cleared, until it is
   * answered (the sidecar runs one operation of a job at a time, so the repeat waits for the first and answers
   * with its outcome); the interrupt status is restored after. {@code body} gives the request body for each send
   * (or null).
   */
  public static Response runToItsEnd(String op, Map<String, Object> args,
      java.util.function.Supplier<RequestBody> body) throws IOException {
    boolean interrupted = false;
    try {
      while (true) {
        try {
          return run(op, args, body.get(), Sidecar::collect);
        } catch (IOException e) {
          boolean cut = Thread.interrupted() || e.getCause() instanceof ClosedByInterruptException
              || e instanceof ClosedByInterruptException || e instanceof java.io.InterruptedIOException;
          if (!cut) {
            throw e;
          }
          interrupted = true;
          LOG.warn("{} was interrupted; waiting for its outcome (the sidecar runs it to its end)", op);
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** Run {@code action} with the thread's interrupt status cleared (restored after). */
  public static <T> T uninterruptibly(IOAction<T> action) throws IOException {
    boolean interrupted = Thread.interrupted();
    try {
      return action.run();
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** An action that may throw an IOException. */
  public interface IOAction<T> {
    T run() throws IOException;
  }

  /** A handler that reads the whole response (its body, if any, into {@link Response#payload}). */
  public static Response collect(Map<String, Object> header, FrameChannel.Body body) throws IOException {
    if (body == null) {
      return new Response(header, new byte[0]);
    }
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    body.transferTo(out);
    return new Response(header, out.toByteArray());
  }

  /**
   * Send one request to this sidecar and hand its response to {@code handler} (the body must be read
   * there; what the handler leaves is skipped). Errors: the mapped exception of an error response; a
   * {@link SidecarDiedException} if this sidecar is gone.
   */
  public <T> T exchange(String op, Map<String, Object> args, RequestBody body, ResponseHandler<T> handler)
      throws IOException {
    return connections.exchange(op, args, body, handler);
  }

  /** An error response, carried through the handler as an unchecked exception so the channel is kept. */
  static final class SidecarException extends IOException {
    private static final long serialVersionUID = 1L;
    private final IOException mapped;

    SidecarException(IOException mapped) {
      super(mapped.getMessage(), mapped);
      this.mapped = mapped;
    }

    IOException unwrap() {
      return mapped;
    }
  }

  @SuppressWarnings("unchecked")
  static IOException toException(Map<String, Object> header) {
    Map<String, Object> error = (Map<String, Object>) header.getOrDefault("error", new HashMap<>());
    return new SidecarException(SidecarErrors.of(error));
  }

  /** Whether a new sidecar may be sent {@code op} again (as the last hello's table says). */
  public static boolean isRestartable(String op) {
    return SidecarOperations.isRestartable(op);
  }

  /** Helper for callers that stream a request body from an output stream. */
  public static RequestBody streamed(StreamWriter writer) {
    return channel -> {
      try (OutputStream out = channel.bodyStream()) {
        writer.write(out);
      }
    };
  }

  /** Writes a request body to a stream. */
  public interface StreamWriter {
    void write(OutputStream out) throws IOException;
  }
}

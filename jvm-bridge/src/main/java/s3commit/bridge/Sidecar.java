package s3commit.bridge;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.SocketTimeoutException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedByInterruptException;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

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
 * journal; the sidecar sends that table in its hello, so this class keeps no copy). A request that depended on the dead sidecar's state (writing a
 * file, committing a task) fails with a {@link SidecarDiedException} naming the operation and the exit
 * status, and Spark retries the task. Streams pin the sidecar that opened them ({@link #exchange}), so a
 * handle of a dead sidecar is never sent to its successor.
 */
public final class Sidecar {
  private static final Logger LOG = LoggerFactory.getLogger(Sidecar.class);
  /** Operations a new sidecar can serve again after the one they were sent to died (from the last hello). */
  private static volatile Set<String> restartable = Set.of();
  /** Seconds to wait for each operation's answer, 0 for as long as the sidecar lives (from the last hello). */
  private static volatile Map<String, Double> timeouts = Map.of();
  private static final ScheduledExecutorService WATCHDOG = Executors.newSingleThreadScheduledExecutor(r -> {
    Thread thread = new Thread(r, "s3commit-sidecar-watchdog");
    thread.setDaemon(true);
    return thread;
  });
  private static Sidecar instance;
  private static int generations;

  private final Process process;
  private final Path socket;
  private final String token;
  private final String pythonVersion;
  private final String blocksDir;
  private final int generation;
  private final ConcurrentLinkedDeque<FrameChannel> idle = new ConcurrentLinkedDeque<>();

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

  private Sidecar(Process process, Path socket, String token, String pythonVersion, String blocksDir,
      int generation) {
    this.process = process;
    this.socket = socket;
    this.token = token;
    this.pythonVersion = pythonVersion;
    this.blocksDir = blocksDir;
    this.generation = generation;
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
        instance.closeAll();
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
    SidecarProcess launched = SidecarProcess.launch();
    Sidecar sidecar = new Sidecar(launched.process, launched.socket, launched.token, launched.pythonVersion,
        launched.blocksDir, generation);
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
    sidecar.release(sidecar.connect());
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
        if (restarted || !restartable.contains(op)) {
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
    Map<String, Object> header = new LinkedHashMap<>(args);
    header.put("op", op);
    FrameChannel.encode(header);  // an oversized header fails here, before any connection is touched
    FrameChannel channel = idle.pollFirst();
    if (channel == null) {
      channel = connectOrDied(op);
    }
    Map<String, Object> reply;
    T result;
    double seconds = timeouts.getOrDefault(op, 0.0);
    AtomicBoolean timedOut = new AtomicBoolean();
    FrameChannel watched = channel;
    ScheduledFuture<?> alarm = seconds <= 0 ? null : WATCHDOG.schedule(() -> {
      timedOut.set(true);
      watched.close();  // the blocked read fails; this connection is never used again
    }, (long) (seconds * 1000), TimeUnit.MILLISECONDS);
    try {
      if (body == null) {
        channel.writeHeader(header);
      } else {
        channel.writeBodyHeader(header);
        body.write(channel);
      }
      reply = channel.readHeader();
      FrameChannel.Body replyBody = Boolean.TRUE.equals(reply.get("body")) ? channel.body(Sidecar::toException)
          : null;
      if (!Boolean.TRUE.equals(reply.get("ok"))) {
        if (replyBody != null) {
          replyBody.drain();
        }
        throw toException(reply);
      }
      try {
        result = handler.handle(reply, replyBody);
      } finally {
        if (replyBody != null && !replyBody.isDone()) {
          replyBody.drain();
        }
      }
    } catch (FrameChannel.FrameTooLargeException e) {
      discard(channel);
      throw e;
    } catch (SidecarException e) {
      // An error the sidecar reported (in a header or a cut-short body): the connection is in step.
      release(channel);
      throw e.unwrap();
    } catch (IOException e) {
      discard(channel);
      if (timedOut.get()) {
        throw new SocketTimeoutException("s3commit sidecar request " + op + " got no answer within " + seconds
            + " s (the sidecar's limit for metadata operations, S3COMMIT_BRIDGE_METADATA_TIMEOUT)");
      }
      throw failure(op, e);
    } finally {
      if (alarm != null) {
        alarm.cancel(false);
      }
    }
    if (timedOut.get()) {
      discard(channel);
    } else {
      release(channel);
    }
    return result;
  }

  private IOException failure(String op, IOException e) {
    if (e instanceof ClosedByInterruptException) {
      return new IOException("s3commit sidecar request " + op + " failed: the calling thread was interrupted "
          + "(Spark cancelled the task)", e);
    }
    if (!aliveAfter(200)) {
      return new SidecarDiedException("the s3commit sidecar (pid " + pid() + ") died during " + op + " ("
          + SidecarProcess.exitDescription(process) + "); what it held for this request is lost", e);
    }
    String cause = e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName();
    return new IOException("s3commit sidecar request " + op + " failed: " + cause, e);
  }

  private boolean aliveAfter(long millis) {
    try {
      return !process.waitFor(millis, TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return process.isAlive();
    }
  }

  private FrameChannel connectOrDied(String op) throws IOException {
    try {
      return connect();
    } catch (IOException e) {
      throw failure(op, e);
    }
  }

  private void release(FrameChannel channel) {
    idle.offerFirst(channel);
  }

  private void discard(FrameChannel channel) {
    // The connection may be mid-message: never reuse it.
    channel.close();
  }

  private void closeAll() {
    FrameChannel channel;
    while ((channel = idle.pollFirst()) != null) {
      channel.close();
    }
  }

  /** An error response, carried through the handler as an unchecked exception so the channel is kept. */
  private static final class SidecarException extends IOException {
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

  private FrameChannel connect() throws IOException {
    SocketChannel socketChannel = SocketChannel.open(StandardProtocolFamily.UNIX);
    try {
      socketChannel.connect(UnixDomainSocketAddress.of(socket));
      FrameChannel channel = new FrameChannel(socketChannel);
      Map<String, Object> hello = new LinkedHashMap<>();
      hello.put("op", "hello");
      hello.put("token", token);
      hello.put("version", jarVersion());
      channel.writeHeader(hello);
      Map<String, Object> response = channel.readHeader();
      if (!Boolean.TRUE.equals(response.get("ok"))) {
        channel.close();
        throw ((SidecarException) toException(response)).unwrap();
      }
      learn(response.get("operations"));
      return channel;
    } catch (IOException | RuntimeException e) {
      socketChannel.close();
      throw e;
    }
  }

  /** Take the restartable operations and the timeouts from the sidecar's operation table (its hello). */
  @SuppressWarnings("unchecked")
  static void learn(Object operations) {
    if (!(operations instanceof Map)) {
      return;
    }
    Map<String, Object> table = (Map<String, Object>) operations;
    Object names = table.get("restartable");
    if (names instanceof java.util.Collection) {
      Set<String> set = new java.util.HashSet<>();
      for (Object name : (java.util.Collection<Object>) names) {
        set.add(String.valueOf(name));
      }
      restartable = Set.copyOf(set);
    }
    Object limits = table.get("timeouts");
    if (limits instanceof Map) {
      Map<String, Double> map = new HashMap<>();
      for (Map.Entry<String, Object> e : ((Map<String, Object>) limits).entrySet()) {
        if (e.getValue() instanceof Number) {
          map.put(e.getKey(), ((Number) e.getValue()).doubleValue());
        }
      }
      timeouts = Map.copyOf(map);
    }
  }

  /** Whether a new sidecar may be sent {@code op} again (as the last hello's table says). */
  public static boolean isRestartable(String op) {
    return restartable.contains(op);
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

package s3commit.bridge;

import java.io.IOException;
import java.net.SocketTimeoutException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ClosedByInterruptException;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One sidecar's connections, on the wire: the hello that opens each (the token, the jar's version, the operation
 * table in the answer), the pool of idle ones that task threads share, and one request and its response on one
 * of them, with the operation's time limit, the error mapping and what a broken connection means (the sidecar
 * died, or the thread was interrupted). Which sidecar, and what to do when it is gone, is {@link Sidecar}'s.
 */
final class SidecarConnections {
  private static final ScheduledExecutorService WATCHDOG = Executors.newSingleThreadScheduledExecutor(r -> {
    Thread thread = new Thread(r, "s3commit-sidecar-watchdog");
    thread.setDaemon(true);
    return thread;
  });

  private final Process process;
  private final Path socket;
  private final String token;
  private final ConcurrentLinkedDeque<FrameChannel> idle = new ConcurrentLinkedDeque<>();

  SidecarConnections(Process process, Path socket, String token) {
    this.process = process;
    this.socket = socket;
    this.token = token;
  }

  /** Open one connection and keep it for the next request: fails now, with both versions named, if they differ. */
  void handshake() throws IOException {
    release(connect());
  }

  /** {@link Sidecar#exchange}: one request on one of this sidecar's connections. */
  <T> T exchange(String op, Map<String, Object> args, Sidecar.RequestBody body, Sidecar.ResponseHandler<T> handler)
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
    double seconds = SidecarOperations.timeout(op);
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
        throw Sidecar.toException(reply);
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
    } catch (Sidecar.SidecarException e) {
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
      return new Sidecar.SidecarDiedException("the s3commit sidecar (pid " + process.pid() + ") died during " + op
          + " (" + SidecarProcess.exitDescription(process) + "); what it held for this request is lost", e);
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

  /** Close the idle connections (of a sidecar that is gone). */
  void closeAll() {
    FrameChannel channel;
    while ((channel = idle.pollFirst()) != null) {
      channel.close();
    }
  }

  private FrameChannel connect() throws IOException {
    SocketChannel socketChannel = SocketChannel.open(StandardProtocolFamily.UNIX);
    try {
      socketChannel.connect(UnixDomainSocketAddress.of(socket));
      FrameChannel channel = new FrameChannel(socketChannel);
      Map<String, Object> hello = new LinkedHashMap<>();
      hello.put("op", "hello");
      hello.put("token", token);
      hello.put("version", Sidecar.jarVersion());
      channel.writeHeader(hello);
      Map<String, Object> response = channel.readHeader();
      if (!Boolean.TRUE.equals(response.get("ok"))) {
        channel.close();
        throw ((Sidecar.SidecarException) Sidecar.toException(response)).unwrap();
      }
      SidecarOperations.learn(response.get("operations"));
      return channel;
    } catch (IOException | RuntimeException e) {
      socketChannel.close();
      throw e;
    }
  }
}

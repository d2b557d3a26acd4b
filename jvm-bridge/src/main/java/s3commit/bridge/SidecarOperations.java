package s3commit.bridge;

import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * What the JVM knows of the sidecar's operations, from the table each sidecar sends in its hello
 * ({@code s3commit/bridge/operations.json}; this class keeps no copy): which a new sidecar may be sent again after
 * the one they went to died, and how long to wait for each one's answer.
 */
final class SidecarOperations {
  /** Operations a new sidecar can serve again after the one they were sent to died (from the last hello). */
  private static volatile Set<String> restartable = Set.of();
  /** Seconds to wait for each operation's answer, 0 for as long as the sidecar lives (from the last hello). */
  private static volatile Map<String, Double> timeouts = Map.of();

  private SidecarOperations() {
  }

  /** Take the restartable operations and the timeouts from the sidecar's operation table (its hello). */
  @SuppressWarnings("unchecked")
  static void learn(Object operations) {
    if (!(operations instanceof Map)) {
      return;
    }
    Map<String, Object> table = (Map<String, Object>) operations;
    Object names = table.get("restartable");
    if (names instanceof Collection) {
      Set<String> set = new HashSet<>();
      for (Object name : (Collection<Object>) names) {
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
  static boolean isRestartable(String op) {
    return restartable.contains(op);
  }

  /** Seconds to wait for {@code op}'s answer; 0: as long as the sidecar lives. */
  static double timeout(String op) {
    return timeouts.getOrDefault(op, 0.0);
  }
}

/*
 * Apache Kafka's own assignors on an input file that tests/bench/kafka_java.py writes, so that
 * they run beside spark-lag-assign's on the same group. Plain data in, JSON out.
 *
 *   java -cp <this dir>:<.jvm/assignors/*> AssignorBench INPUT OUTPUT WARMUP RUNS BUDGET OWNERS NAME...
 *
 * NAME: client-range, client-roundrobin, client-sticky, client-cooperative-sticky (kafka-clients,
 * ConsumerPartitionAssignor.assign(Cluster, GroupSubscription)), server-uniform, server-range
 * (kafka-group-coordinator, assign(GroupSpec, SubscribedTopicDescriber)). OWNERS is 1 to write
 * who owns each partition after the last call, 0 for times only.
 *
 * Timing: what an assignor is handed (cluster metadata, subscriptions carrying the previous
 * plan the way each assignor reads it, the server's current assignment and its inverse) is
 * built once, before any clock starts; the clock covers the assign call alone, after a GC.
 * Up to WARMUP untimed calls first (at least one; no more once they took BUDGET / 4 seconds),
 * then up to RUNS timed calls (at least three; no more once they took BUDGET seconds). The
 * JSON lists every timed call and their median.
 *
 * Input, whitespace-separated tokens:
 *   topics T      then T pairs: name partitions
 *   lists L       then L lists: k topic-index...      (distinct subscriptions, shared by members)
 *   members M     then M pairs: name list-index
 *   previous P    then P rows: topic-index owner-index per partition (-1: nobody)
 */

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberSubscription;
import org.apache.kafka.coordinator.group.api.assignor.PartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.StreamTokenizer;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

public final class AssignorBench {

    /** The group as read from the input file: plain arrays, indices into them. */
    static final class Group {
        String[] topics;
        int[] partitions;          // per topic
        int[][] lists;             // distinct subscriptions: topic indices
        String[] members;
        int[] memberList;          // per member: index into lists
        int[][] previous;          // per topic: owner (member index) per partition, -1 nobody; null: no previous plan
        Cluster cluster;           // built on first use, shared by the client assignors (it is immutable)
    }

    /** One assignor with its inputs built: call() runs assign once and returns the nanoseconds
     *  it took; owners() reads the last result. */
    interface Prepared {
        long call();
        int[][] owners(Group group);
    }

    public static void main(String[] args) throws IOException {
        Group group = read(Path.of(args[0]));
        int warmup = Integer.parseInt(args[2]);
        int runs = Integer.parseInt(args[3]);
        double budget = Double.parseDouble(args[4]) * 1e9;
        boolean withOwners = args[5].equals("1");
        StringBuilder json = new StringBuilder("{\"members\": ").append(strings(group.members)).append(", \"results\": [");
        for (int a = 6; a < args.length; a++) {
            Prepared assignor = prepare(args[a], group);
            int warmed = 0;
            for (long spent = 0; warmed < Math.max(1, warmup) && (warmed == 0 || spent < budget / 4); warmed++) {
                System.gc();
                spent += assignor.call();
            }
            List<Long> nanos = new ArrayList<>();
            for (long spent = 0; nanos.size() < Math.max(1, runs) && (nanos.size() < 3 || spent < budget); ) {
                System.gc();
                nanos.add(assignor.call());
                spent += nanos.get(nanos.size() - 1);
            }
            long[] sorted = nanos.stream().mapToLong(Long::longValue).sorted().toArray();
            int n = sorted.length;
            double median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
            json.append(a > 6 ? ", " : "").append("{\"assignor\": \"").append(args[a]).append("\", \"warmup\": ")
                .append(warmed).append(", \"seconds\": [");
            for (int i = 0; i < n; i++) json.append(i > 0 ? ", " : "").append(nanos.get(i) / 1e9);
            json.append("], \"median\": ").append(median / 1e9);
            if (withOwners) {
                json.append(", \"owners\": [");
                int[][] owners = assignor.owners(group);
                for (int t = 0; t < owners.length; t++) json.append(t > 0 ? ", " : "").append(Arrays.toString(owners[t]));
                json.append("]");
            }
            json.append("}");
        }
        json.append("]}\n");
        Files.writeString(Path.of(args[1]), json);
    }

    static Prepared prepare(String name, Group group) {
        switch (name) {
            case "client-range": return client(group, new RangeAssignor());
            case "client-roundrobin": return client(group, new RoundRobinAssignor());
            case "client-sticky": return client(group, new StickyAssignor());
            case "client-cooperative-sticky": return client(group, new CooperativeStickyAssignor());
            case "server-uniform": return server(group, new UniformAssignor());
            case "server-range": return server(group, new org.apache.kafka.coordinator.group.assignor.RangeAssignor());
            default: throw new IllegalArgumentException("unknown assignor " + name);
        }
    }

    // -- kafka-clients: ConsumerPartitionAssignor.assign(Cluster, GroupSubscription) -------------

    static final int GENERATION = 1;

    @SuppressWarnings("removal") // ConsumerGroupMetadata's constructor: the one way to hand an assignor its last assignment
    static Prepared client(Group g, ConsumerPartitionAssignor assignor) {
        if (g.cluster == null) {
            List<PartitionInfo> infos = new ArrayList<>();
            Node[] none = new Node[0];
            for (int t = 0; t < g.topics.length; t++) {
                for (int p = 0; p < g.partitions[t]; p++) infos.add(new PartitionInfo(g.topics[t], p, null, none, none));
            }
            g.cluster = new Cluster("bench", List.of(), infos, Set.of(), Set.of());
        }
        List<List<String>> topicLists = new ArrayList<>();
        for (int[] list : g.lists) {
            List<String> names = new ArrayList<>();
            for (int t : list) names.add(g.topics[t]);
            topicLists.add(Collections.unmodifiableList(names));
        }
        List<List<TopicPartition>> owned = ownedByMember(g);
        int generation = g.previous == null ? -1 : GENERATION;  // -1: none
        boolean eager = assignor instanceof StickyAssignor;
        ByteBuffer[] userData = new ByteBuffer[g.members.length];
        for (int m = 0; m < g.members.length; m++) {
            // StickyAssignor (eager: members revoke everything before they rejoin) reads the
            // previous plan from its user data, written by the member's own StickyAssignor after
            // its last assignment; the others read ownedPartitions and the generation.
            ConsumerPartitionAssignor own = eager ? new StickyAssignor()
                : assignor instanceof CooperativeStickyAssignor ? new CooperativeStickyAssignor() : null;
            if (own == null) continue;
            if (g.previous != null) {
                own.onAssignment(new Assignment(owned.get(m)), new ConsumerGroupMetadata("bench", GENERATION, g.members[m], Optional.empty()));
            }
            userData[m] = own.subscriptionUserData(new HashSet<>(topicLists.get(g.memberList[m])));
        }
        return new Prepared() {
            Map<String, Assignment> result;

            public long call() {
                Map<String, Subscription> subscriptions = new HashMap<>();
                for (int m = 0; m < g.members.length; m++) {
                    // a fresh view of the user data each call: reading it moves its position
                    ByteBuffer data = userData[m] == null ? null : userData[m].duplicate();
                    subscriptions.put(g.members[m], new Subscription(topicLists.get(g.memberList[m]), data,
                        eager ? List.of() : owned.get(m), generation, Optional.empty()));
                }
                GroupSubscription request = new GroupSubscription(subscriptions);
                long start = System.nanoTime();
                result = assignor.assign(g.cluster, request).groupAssignment();
                return System.nanoTime() - start;
            }

            public int[][] owners(Group group) {
                int[][] out = emptyOwners(group);
                Map<String, Integer> topicIndex = index(group.topics);
                Map<String, Integer> memberIndex = index(group.members);
                for (Map.Entry<String, Assignment> e : result.entrySet()) {
                    int m = memberIndex.get(e.getKey());
                    for (TopicPartition tp : e.getValue().partitions()) claim(out, topicIndex.get(tp.topic()), tp.partition(), m);
                }
                return out;
            }
        };
    }

    static List<List<TopicPartition>> ownedByMember(Group g) {
        List<List<TopicPartition>> owned = new ArrayList<>();
        for (int m = 0; m < g.members.length; m++) owned.add(new ArrayList<>());
        if (g.previous == null) return owned;
        for (int t = 0; t < g.topics.length; t++) {
            if (g.previous[t] == null) continue;
            for (int p = 0; p < g.previous[t].length; p++) {
                if (g.previous[t][p] >= 0) owned.get(g.previous[t][p]).add(new TopicPartition(g.topics[t], p));
            }
        }
        owned.replaceAll(Collections::unmodifiableList);
        return owned;
    }

    // -- kafka-group-coordinator: PartitionAssignor.assign(GroupSpec, SubscribedTopicDescriber) --

    /** Topic t gets the id (1, t): ids are opaque to the assignors and this keeps them reproducible. */
    static Uuid topicId(int t) {
        return new Uuid(1L, t);
    }

    static Prepared server(Group g, PartitionAssignor assignor) {
        List<Set<Uuid>> idLists = new ArrayList<>();
        for (int[] list : g.lists) {
            Set<Uuid> ids = new HashSet<>();
            for (int t : list) ids.add(topicId(t));
            idLists.add(ids);
        }
        Map<String, MemberSubscription> subscriptions = new HashMap<>();
        List<Map<Uuid, Set<Integer>>> held = new ArrayList<>();
        Map<Uuid, Map<Integer, String>> inverted = new HashMap<>();
        for (int m = 0; m < g.members.length; m++) {
            subscriptions.put(g.members[m], new Subscribed(idLists.get(g.memberList[m])));
            held.add(new HashMap<>());
        }
        if (g.previous != null) {
            for (int t = 0; t < g.topics.length; t++) {
                if (g.previous[t] == null) continue;
                for (int p = 0; p < g.previous[t].length; p++) {
                    int m = g.previous[t][p];
                    if (m < 0) continue;
                    held.get(m).computeIfAbsent(topicId(t), k -> new HashSet<>()).add(p);
                    inverted.computeIfAbsent(topicId(t), k -> new HashMap<>()).put(p, g.members[m]);
                }
            }
        }
        // The coordinator hands out read-only assignments (the assignors check, and reuse them).
        Map<String, MemberAssignment> assignments = new HashMap<>();
        for (int m = 0; m < g.members.length; m++) {
            Map<Uuid, Set<Integer>> mine = new HashMap<>();
            held.get(m).forEach((topic, partitions) -> mine.put(topic, Collections.unmodifiableSet(partitions)));
            assignments.put(g.members[m], new Assigned(Collections.unmodifiableMap(mine)));
        }
        boolean homogeneous = Arrays.stream(g.memberList).distinct().count() <= 1;
        GroupSpec spec = new Spec(subscriptions, assignments, inverted,
            homogeneous ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS);
        Map<Uuid, Integer> sizes = new HashMap<>();
        for (int t = 0; t < g.topics.length; t++) sizes.put(topicId(t), g.partitions[t]);
        SubscribedTopicDescriber describer = new Describer(sizes);
        return new Prepared() {
            GroupAssignment result;

            public long call() {
                long start = System.nanoTime();
                result = assignor.assign(spec, describer);
                return System.nanoTime() - start;
            }

            public int[][] owners(Group group) {
                int[][] out = emptyOwners(group);
                Map<String, Integer> memberIndex = index(group.members);
                for (Map.Entry<String, MemberAssignment> e : result.members().entrySet()) {
                    int m = memberIndex.get(e.getKey());
                    for (Map.Entry<Uuid, Set<Integer>> tp : e.getValue().partitions().entrySet()) {
                        int t = (int) tp.getKey().getLeastSignificantBits();
                        for (int p : tp.getValue()) claim(out, t, p, m);
                    }
                }
                return out;
            }
        };
    }

    record Subscribed(Set<Uuid> subscribedTopicIds) implements MemberSubscription {
        public Optional<String> rackId() { return Optional.empty(); }
        public Optional<String> instanceId() { return Optional.empty(); }
    }

    record Assigned(Map<Uuid, Set<Integer>> partitions) implements MemberAssignment { }

    /** What the coordinator hands its assignor: subscriptions, the current assignment, and its inverse. */
    record Spec(Map<String, MemberSubscription> subscriptions, Map<String, MemberAssignment> assignments,
                Map<Uuid, Map<Integer, String>> inverted, SubscriptionType subscriptionType) implements GroupSpec {
        public Collection<String> memberIds() { return subscriptions.keySet(); }
        public boolean isPartitionAssigned(Uuid topicId, int partition) {
            Map<Integer, String> owners = inverted.get(topicId);
            return owners != null && owners.containsKey(partition);
        }
        public boolean isPartitionAssignable(Uuid topicId, int partition) { return true; }
        public MemberSubscription memberSubscription(String memberId) { return subscriptions.get(memberId); }
        public MemberAssignment memberAssignment(String memberId) { return assignments.get(memberId); }
    }

    record Describer(Map<Uuid, Integer> sizes) implements SubscribedTopicDescriber {
        public int numPartitions(Uuid topicId) { return sizes.getOrDefault(topicId, -1); }
        public Set<String> racksForPartition(Uuid topicId, int partition) { return Set.of(); }
    }

    // -- plumbing ---------------------------------------------------------------------------------

    static int[][] emptyOwners(Group g) {
        int[][] out = new int[g.topics.length][];
        for (int t = 0; t < out.length; t++) {
            out[t] = new int[g.partitions[t]];
            Arrays.fill(out[t], -1);
        }
        return out;
    }

    static void claim(int[][] owners, int t, int p, int m) {
        if (owners[t][p] != -1) throw new IllegalStateException("partition " + t + "-" + p + " assigned twice");
        owners[t][p] = m;
    }

    static Map<String, Integer> index(String[] names) {
        Map<String, Integer> out = new HashMap<>();
        for (int i = 0; i < names.length; i++) out.put(names[i], i);
        return out;
    }

    static String strings(String[] values) {
        StringBuilder out = new StringBuilder("[");
        for (int i = 0; i < values.length; i++) out.append(i > 0 ? ", " : "").append('"').append(values[i]).append('"');
        return out.append("]").toString();
    }

    static Group read(Path path) throws IOException {
        try (BufferedReader reader = Files.newBufferedReader(path)) {
            StreamTokenizer in = new StreamTokenizer(reader);
            in.resetSyntax();
            in.wordChars(0x21, 0x7e);
            in.whitespaceChars(0, 0x20);
            Group g = new Group();
            expect(in, "topics");
            int topics = integer(in);
            g.topics = new String[topics];
            g.partitions = new int[topics];
            for (int t = 0; t < topics; t++) {
                g.topics[t] = word(in);
                g.partitions[t] = integer(in);
            }
            expect(in, "lists");
            g.lists = new int[integer(in)][];
            for (int l = 0; l < g.lists.length; l++) {
                g.lists[l] = new int[integer(in)];
                for (int i = 0; i < g.lists[l].length; i++) g.lists[l][i] = integer(in);
            }
            expect(in, "members");
            int members = integer(in);
            g.members = new String[members];
            g.memberList = new int[members];
            for (int m = 0; m < members; m++) {
                g.members[m] = word(in);
                g.memberList[m] = integer(in);
            }
            if (in.nextToken() != StreamTokenizer.TT_EOF) {
                in.pushBack();
                expect(in, "previous");
                int rows = integer(in);
                g.previous = new int[topics][];
                for (int r = 0; r < rows; r++) {
                    int t = integer(in);
                    g.previous[t] = new int[g.partitions[t]];
                    for (int p = 0; p < g.partitions[t]; p++) g.previous[t][p] = integer(in);
                }
            }
            return g;
        }
    }

    static String word(StreamTokenizer in) throws IOException {
        if (in.nextToken() != StreamTokenizer.TT_WORD) throw new IOException("input: expected a word at line " + in.lineno());
        return in.sval;
    }

    static int integer(StreamTokenizer in) throws IOException {
        return Integer.parseInt(word(in));
    }

    static void expect(StreamTokenizer in, String keyword) throws IOException {
        String got = word(in);
        if (!got.equals(keyword)) throw new IOException("input: expected '" + keyword + "', got '" + got + "'");
    }
}

// hlab's MongoDB stand-in: mongo-java-server's in-memory backend, with its
// oplog enabled so that change streams work, listening on HOST:PORT until
// the process is told to stop (SIGTERM). It is NOT MongoDB: a real mongod
// cannot be installed where hlab was built, and this speaks enough of the
// wire protocol for the driver, finds, writes and collection change
// streams. What differs from MongoDB is listed in internal/deps/mongo.go.
//
// internal/deps compiles this file with javac into its cache at first use
// (FetchMongo); the jars come from Maven Central:
// de.bwaldvogel:mongo-java-server-memory-backend and slf4j-simple.
//
// Usage: java -cp 'lib/*:classes' MongoStandIn HOST PORT

import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.ServerVersion;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;

import java.util.concurrent.CountDownLatch;

public final class MongoStandIn {
    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: MongoStandIn HOST PORT");
            System.exit(2);
        }
        MemoryBackend backend = new MemoryBackend();
        // Reports MongoDB 5.0 and wire version 8: the newest this server
        // offers, and what the Go driver v2.8 still accepts.
        backend.version(ServerVersion.MONGO_5_0);
        MongoServer server = new MongoServer(backend);
        // Without the oplog a change stream opens but never sees a change.
        server.enableOplog();
        server.bind(args[0], Integer.parseInt(args[1]));
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            server.shutdownNow();
            stopped.countDown();
        }));
        System.out.println("MongoStandIn: mongo-java-server listening on " + server.getLocalAddress()
            + " (in memory, oplog enabled, reports MongoDB 5.0)");
        System.out.flush();
        stopped.await();
    }
}

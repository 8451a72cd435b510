// Package tasks is report C's task API, built for real: a JSON-over-HTTP
// CRUD backend on Postgres (pgx) with sign-up and login, bearer tokens,
// tasks scoped to their owner, live updates over one WebSocket per device,
// and push notifications to a webhook through a bounded queue with n
// workers. It serves 1M requests on 1 CPU and 2 GB (hlab lab crud).
//
// # Routes
//
//	POST   /v1/auth/signup   {"email","password","name"}      201 {"user","token","expires_at"}
//	POST   /v1/auth/login    {"email","password"}             200 {"user","token","expires_at"}
//	GET    /v1/me                                             200 user
//	POST   /v1/devices       {"platform","push_token"}        201 device
//	GET    /v1/devices                                        200 {"devices":[...]}
//	DELETE /v1/devices/{id}                                   204
//	POST   /v1/tasks         {"title","description","status","priority","due_at","notes"}  201 task
//	GET    /v1/tasks?status=&priority=&due_before=&due_after=&sort=&limit=&offset=  200 {"tasks":[...],"next_offset"}
//	GET    /v1/tasks/{id}                                     200 task with its "notes"
//	PATCH  /v1/tasks/{id}    any of the create fields         200 task
//	DELETE /v1/tasks/{id}                                     204
//	POST   /v1/ws/ticket                                      201 {"ticket","expires_at"}
//	GET    /v1/ws?after_seq= WebSocket: the user's task events (resume: --events postgres)
//	GET    /openapi.json     this list as an OpenAPI 3 description (no token needed)
//
// A task's notes are its details row (task_details, a has-one): the GET
// of one task reads them with a LEFT JOIN, as report C's GET did.
//
// Every /v1 route but signup and login needs "Authorization: Bearer
// TOKEN". A browser, which cannot set headers on a WebSocket, opens it
// with a ticket from POST /v1/ws/ticket in ?ticket=, good once on all
// the instances together; a token in the URL (?token=) is refused with
// 401 token_in_url, since proxies log URLs. A task of
// another user answers 404, never 403: its existence does not leak.
// Errors are JSON, {"error": "kind", "reason": "what to fix"}, with the
// status of the kind (errors.go).
//
// # Input and its description
//
// openapi.json says what a request may hold, and the service refuses
// what it does not allow with the documented status: a field sent as null
// where the description has a string or an integer (only due_at may be
// null: it clears the due date) is 422 invalid_field, as is text holding
// the NUL character (Postgres cannot store it), a due_at whose year, as
// written, is outside 1970-9998, and a password outside 8-72 characters
// (one longer than bcrypt's 72 bytes is hashed through SHA-256, so all of
// it counts). A method a path does not serve answers 405 with Allow.
// TestSchemathesis holds the service to the description with schemathesis,
// which generates requests from GET /openapi.json.
//
// # Limits
//
// Login attempts are limited per client address and per account (token
// buckets, ratelimit.go); past a limit, login answers 429
// too_many_logins with Retry-After before any password is checked.
// Sign-ups are limited per address and on the whole service. Where the
// buckets live is Config.LoginLimits: in each process by default, so N
// instances behind a balancer allow N times every limit (a guesser gets
// three times the account's burst from three instances); with
// LimitsPostgres every instance takes from the same rows of
// rate_buckets, one upsert per attempt, and the limits hold for the
// cluster exactly. The client's address is the connection's peer; behind
// a balancer that is every client's address, unless the balancer is one
// of Config.TrustedProxies, whose X-Forwarded-For is then believed (the
// rightmost address in it that is not a trusted proxy; a header from any
// other peer is ignored). A user's WebSockets on one process are bounded
// (MaxWebSocketsPerUser, default 8): one more is refused with 429
// too_many_websockets before the upgrade. A WebSocket lives no longer
// than its token: at expiry it is closed with StatusTokenExpired (4001,
// "token expired").
//
// # Notifications
//
// By default a change's push notification goes, after commit, to a
// bounded in-memory queue (report C's optimization 7): a full queue
// drops it, and a crash loses what the queue held. With
// Config.NotifyOutbox it is written to the notify_outbox table in the
// change's own transaction and delivered from there at least once
// (outbox.go): workers on any instance claim due rows in leased batches
// (FOR UPDATE SKIP LOCKED), delete them only after the webhook's 2xx,
// retry failures with backoff, and keep a row that runs out of retries
// (or that the webhook refuses, 4xx) as failed, counted in
// tasks_notify_outbox_failed, until an operator requeues it (the SQL is
// in migration 0007). A process that dies mid-delivery leaves its rows to
// be claimed again when their lease ends: the webhook may receive a
// notification twice, with the same Notification.ID, by which it can
// drop the copy.
//
// # Report C's optimizations as switches
//
// Each of the report's fixes is on by default; Config's Deopt turns one
// off to measure what it was worth (the lab's crud experiment):
// connection pool limits (off: database/sql's defaults, unlimited open
// connections and 2 idle, so connections churn), a capped telemetry
// budget (off: every request traced, and a full span export queue makes
// requests wait instead of dropping spans; the queue stays bounded),
// indexes on the JOIN and ORDER BY columns, no per-statement transaction
// (off: every write in its own transaction, as GORM does by default), no
// per-request user-row update (off: the report's bug, a transaction
// around every request that updates the user row first), a raised
// file-descriptor limit (RaiseFileLimit at start; off: the soft limit
// kept at 1024, LowerFileLimit), and a bounded worker queue for side jobs
// (off: one goroutine per job). hlab serve tasks has a flag for each
// (--pool-limits, --telemetry-cap, --indexes, --no-user-touch,
// --no-default-tx, --raise-file-limit, --worker-queue; false turns it off).
//
// # Concurrency
//
// A Service serves requests concurrently. By default (Config.Events
// EventsLocal, report C's setup) task events reach the WebSockets of the
// process that made the change only: behind a balancer, a device on
// another instance misses them. A team running N instances gives them
// the same --token-secret-file (a token then holds on every instance of
// the deployment) and sets --events postgres on every one of them
// (events.go): each change writes
// its event to an event log table in its own transaction, numbered per
// user in commit order (seq, without gaps), and NOTIFYs it; each instance
// LISTENs on one more connection (so budget --max-conns + 1 per instance
// against Postgres' max_connections) and hands each event to its own
// sockets. A socket sends a user's events in seq order, each once. After
// the listener's connection drops, the instance reconnects with backoff
// and every local socket reads from the log what it missed; a device that
// reconnects passes ?after_seq= its last seq and gets what followed, for
// as long as the log keeps it (--event-retention, default 24h; then
// close 4002: list your tasks again). A change costs one more statement
// in its transaction, and changes of one user commit one after another
// (their numbering locks the user's counter row until commit).
package tasks

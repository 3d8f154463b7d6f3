import type { DeviceCleanupStore } from "../cleanup/device-cleanup-store.js";
import { PgDeviceCleanupStore } from "../cleanup/pg-device-cleanup-store.js";
import { SqliteDeviceCleanupStore } from "../cleanup/sqlite-device-cleanup-store.js";
import type { FarmDatabase } from "./database.js";
import { storeDbOf } from "./store-db.js";
import { KyselyActivityStore } from "../activity/kysely-activity-store.js";
import type { ActivityStore } from "../activity/activity-store.js";
import { FileSummaryKeyStore, PgSummaryKeyStore, type SummaryKeyStore } from "../auth/summary-key.js";
import { PgTokenRecordStore } from "../auth/pg-token-record-store.js";
import { SqliteTokenRecordStore } from "../auth/sqlite-token-record-store.js";
import type { TokenRecordStore } from "../auth/token-record-store.js";
import { PgWebSessionStore } from "../auth/pg-web-session-store.js";
import { SqliteWebSessionStore } from "../auth/sqlite-web-session-store.js";
import type { WebSessionStore } from "../auth/web-session-store.js";
import type { ByteStore, ByteStoreKind } from "../bytes/byte-store.js";
import { DatabaseByteStore } from "../bytes/database-byte-store.js";
import { FileByteStore } from "../bytes/file-byte-store.js";
import { PgStoredFileStore } from "../bytes/pg-stored-file-store.js";
import { SqliteStoredFileStore } from "../bytes/sqlite-stored-file-store.js";
import type { DeviceLabelStore } from "../devices/device-label-store.js";
import { KyselyDeviceLabelStore } from "../devices/kysely-device-label-store.js";
import type { BlobIndexStore } from "../evidence/blob-index-store.js";
import type { EvidenceGrantStore } from "../evidence/evidence-grant-store.js";
import type { EvidenceIndexStore } from "../evidence/evidence-index-store.js";
import { KyselyBlobIndexStore } from "../evidence/kysely-blob-index-store.js";
import { KyselyEvidenceGrantStore } from "../evidence/kysely-evidence-grant-store.js";
import { KyselyEvidenceIndexStore } from "../evidence/kysely-evidence-index-store.js";
import { QuotaReservationStore } from "../evidence/quota-reservation-store.js";
import type { LeaseStore } from "../leases/lease-store.js";
import { PgLeaseStore } from "../leases/pg-lease-store.js";
import { SqliteLeaseStore } from "../leases/sqlite-lease-store.js";
import { PgRegistryStore } from "../registry/pg-registry-store.js";
import type { RegistryStore } from "../registry/registry-store.js";
import { SqliteRegistryStore } from "../registry/sqlite-registry-store.js";
import { PgReplicaStore } from "../replicas/pg-replica-store.js";
import type { ReplicaStore } from "../replicas/replica-store.js";
import { SqliteReplicaStore } from "../replicas/sqlite-replica-store.js";
import { IdempotencyStore } from "../routing/idempotency-store.js";
import { KyselySessionStore } from "../sessions/kysely-session-store.js";
import { PgSessionStepStore } from "../sessions/pg-session-step-store.js";
import type { SessionStepStore } from "../sessions/session-step-store.js";
import type { SessionStore } from "../sessions/session-store.js";
import { SqliteSessionStepStore } from "../sessions/sqlite-session-step-store.js";
import { PgVideoSessionStore } from "../video/pg-video-session-store.js";
import { SqliteVideoSessionStore } from "../video/sqlite-video-session-store.js";
import type { VideoSessionStore } from "../video/video-session-store.js";

/*
 * The one place that builds the coordinator's stores for a database. The
 * interface files (`*-store.ts`) only declare; what implements each is
 * chosen here.
 *
 * Written once for both dialects, where SQLite and PostgreSQL take the same
 * SQL: device labels, activity, blob index, evidence grants, the evidence
 * index, sessions (Kysely,
 * kysely-*-store.ts over db/store-db.ts), and the idempotency and quota
 * stores (one SQL text for both, drizzle's `sql`).
 *
 * Still one per dialect (sqlite-*, pg-*), because the semantics differ:
 *  - leases: row locks, SKIP LOCKED, unique-index races and notify;
 *  - tokens (binding an agent) and web sign-ins (the caps): PostgreSQL
 *    takes advisory and row locks so replicas decide one at a time;
 *  - device cleanup state: written in parallel with the conversion and not
 *    yet moved to Kysely (its SQL is the same on both: a candidate);
 *  - registry and claims, session steps, video sessions, replicas, stored
 *    files: several statements in one transaction. better-sqlite3 runs a
 *    transaction synchronously, so nothing interleaves; a Kysely transaction
 *    on SQLite is asynchronous on the one connection every store shares, so
 *    another store's statements could land inside it.
 */

/** Every store of one database, as the coordinator uses them. */
export interface Stores {
  tokens: TokenRecordStore;
  webSessions: WebSessionStore;
  registry: RegistryStore;
  leases: LeaseStore;
  deviceLabels: DeviceLabelStore;
  activity: ActivityStore;
  sessions: SessionStore;
  sessionSteps: SessionStepStore;
  videoSessions: VideoSessionStore;
  evidenceIndex: EvidenceIndexStore;
  evidenceGrants: EvidenceGrantStore;
  blobIndex: BlobIndexStore;
  quotaReservations: QuotaReservationStore;
  idempotency: IdempotencyStore;
  replicas: ReplicaStore;
  deviceCleanups: DeviceCleanupStore;
}

/** Every store of the database. */
export function createStores(database: FarmDatabase): Stores {
  return {
    tokens: createTokenRecordStore(database),
    webSessions: createWebSessionStore(database),
    registry: createRegistryStore(database),
    leases: createLeaseStore(database),
    deviceLabels: createDeviceLabelStore(database),
    activity: createActivityStore(database),
    sessions: createSessionStore(database),
    sessionSteps: createSessionStepStore(database),
    videoSessions: createVideoSessionStore(database),
    evidenceIndex: createEvidenceIndexStore(database),
    evidenceGrants: createEvidenceGrantStore(database),
    blobIndex: createBlobIndexStore(database),
    quotaReservations: new QuotaReservationStore(database),
    idempotency: new IdempotencyStore(database),
    replicas: createReplicaStore(database),
    deviceCleanups: createDeviceCleanupStore(database),
  };
}

export function createTokenRecordStore(database: FarmDatabase): TokenRecordStore {
  return database.dialect === "sqlite" ? new SqliteTokenRecordStore(database.db) : new PgTokenRecordStore(database.db);
}

export function createWebSessionStore(database: FarmDatabase): WebSessionStore {
  return database.dialect === "sqlite" ? new SqliteWebSessionStore(database.db) : new PgWebSessionStore(database.db);
}

export function createRegistryStore(database: FarmDatabase): RegistryStore {
  return database.dialect === "sqlite" ? new SqliteRegistryStore(database.db) : new PgRegistryStore(database.db);
}

export function createLeaseStore(database: FarmDatabase): LeaseStore {
  return database.dialect === "sqlite" ? new SqliteLeaseStore(database.db) : new PgLeaseStore(database.db, database.pool);
}

export function createDeviceLabelStore(database: FarmDatabase): DeviceLabelStore {
  return new KyselyDeviceLabelStore(storeDbOf(database));
}

export function createActivityStore(database: FarmDatabase): ActivityStore {
  return new KyselyActivityStore(storeDbOf(database));
}

export function createSessionStore(database: FarmDatabase): SessionStore {
  return new KyselySessionStore(storeDbOf(database), database.dialect);
}

export function createSessionStepStore(database: FarmDatabase): SessionStepStore {
  return database.dialect === "sqlite" ? new SqliteSessionStepStore(database.db) : new PgSessionStepStore(database.db);
}

export function createVideoSessionStore(database: FarmDatabase): VideoSessionStore {
  return database.dialect === "sqlite" ? new SqliteVideoSessionStore(database.db) : new PgVideoSessionStore(database.db);
}

export function createEvidenceIndexStore(database: FarmDatabase): EvidenceIndexStore {
  return new KyselyEvidenceIndexStore(storeDbOf(database), database.dialect);
}

export function createEvidenceGrantStore(database: FarmDatabase): EvidenceGrantStore {
  return new KyselyEvidenceGrantStore(storeDbOf(database));
}

export function createBlobIndexStore(database: FarmDatabase): BlobIndexStore {
  return new KyselyBlobIndexStore(storeDbOf(database));
}

export function createReplicaStore(database: FarmDatabase): ReplicaStore {
  return database.dialect === "sqlite" ? new SqliteReplicaStore(database.db) : new PgReplicaStore(database.db);
}

/** The key store of this coordinator's database: the data dir's file on SQLite, the shared database on PostgreSQL. */
export function createSummaryKeyStore(database: FarmDatabase, dataDir: string): SummaryKeyStore {
  return database.dialect === "postgres" ? new PgSummaryKeyStore(database.db) : new FileSummaryKeyStore(dataDir);
}

/** The store for --byte-store: files under the data dir, or chunks in the farm's database. */
export function createByteStore(kind: ByteStoreKind, dataDir: string, database: FarmDatabase): ByteStore {
  if (kind === "files") return new FileByteStore(dataDir);
  return new DatabaseByteStore(database.dialect === "sqlite" ? new SqliteStoredFileStore(database.db) : new PgStoredFileStore(database.db));
}

export function createDeviceCleanupStore(database: FarmDatabase): DeviceCleanupStore {
  return database.dialect === "sqlite" ? new SqliteDeviceCleanupStore(database.db) : new PgDeviceCleanupStore(database.db);
}

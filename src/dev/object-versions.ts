/**
 * The object store stand-in's data: seeded objects, how a digest names one of
 * their versions, and the `obj` member of an object read answer. Pure
 * functions over the seed, so the answers are the same on every run.
 */
import { createHash } from 'node:crypto'

export interface SeedVersion {
  val: unknown
  tags?: string[]
  aliases?: string[]
}

export interface SeedObject {
  project_id: string
  object_id: string
  /** Oldest first: the position is the version index, the last one is latest. */
  versions: SeedVersion[]
}

/** The `obj` member of an object read answer. */
export interface StoredObject {
  project_id: string
  object_id: string
  created_at: string
  deleted_at: null
  digest: string
  version_index: number
  is_latest: 1 | 0
  kind: 'object'
  base_object_class: null
  leaf_object_class: null
  /** null when the read asked for metadata only. */
  val: unknown
  service_user_id: 'stand-in'
  size_bytes: number
  /** Present only when the read asked for tags and aliases. */
  tags?: string[]
  aliases?: string[]
}

export interface ReadOptions {
  metadataOnly: boolean
  includeTagsAndAliases: boolean
}

/** One version of one seeded object. */
export interface VersionRef {
  object: SeedObject
  index: number
}

/** Seed timestamps count from here, one hour per version index. */
const SEED_EPOCH_MS = Date.UTC(2025, 0, 1)
const HOUR_MS = 3_600_000

/** A fresh copy each call, so one test's changes never reach another's. */
export function defaultObjects(): SeedObject[] {
  return [
    {
      project_id: 'demo/project',
      object_id: 'config',
      versions: [
        { val: { model: 'demo-model', temperature: 0.7 } },
        { val: { model: 'demo-model', temperature: 0.5 } },
        { val: { model: 'demo-model', temperature: 0.2, max_tokens: 256 }, tags: ['prod'], aliases: ['latest'] },
      ],
    },
  ]
}

/** The JSON text of a value as the store sizes and hashes it (`undefined` counts as null). */
export function valJson(val: unknown): string {
  return JSON.stringify(val) ?? 'null'
}

/** A version's digest: sha256, in hex, of the JSON text of its value. */
export function contentDigest(val: unknown): string {
  return createHash('sha256').update(valJson(val)).digest('hex')
}

/**
 * The version a digest names: `latest` is the last version, `v<N>` the one
 * at index N, otherwise an alias or a content digest, newest match first.
 */
export function findVersion(objects: readonly SeedObject[], projectId: string, objectId: string, digest: string): VersionRef | null {
  const object = objects.find((candidate) => candidate.project_id === projectId && candidate.object_id === objectId)
  if (object === undefined) return null
  const index = versionIndex(object.versions, digest)
  return index === null ? null : { object, index }
}

export function storedObject(ref: VersionRef, options: ReadOptions): StoredObject {
  const { object, index } = ref
  const version = object.versions[index] ?? { val: null }
  const stored: StoredObject = {
    project_id: object.project_id,
    object_id: object.object_id,
    created_at: new Date(SEED_EPOCH_MS + index * HOUR_MS).toISOString(),
    deleted_at: null,
    digest: contentDigest(version.val),
    version_index: index,
    is_latest: index === object.versions.length - 1 ? 1 : 0,
    kind: 'object',
    base_object_class: null,
    leaf_object_class: null,
    val: options.metadataOnly ? null : version.val,
    service_user_id: 'stand-in',
    size_bytes: Buffer.byteLength(valJson(version.val)),
  }
  if (!options.includeTagsAndAliases) return stored
  return { ...stored, tags: [...(version.tags ?? [])], aliases: [...(version.aliases ?? [])] }
}

function versionIndex(versions: readonly SeedVersion[], digest: string): number | null {
  if (versions.length === 0) return null
  if (digest === 'latest') return versions.length - 1
  const numbered = /^v(0|[1-9]\d*)$/.exec(digest)?.[1]
  if (numbered !== undefined) {
    const index = Number(numbered)
    return index < versions.length ? index : null
  }
  const byAlias = versions.findLastIndex((version) => version.aliases?.includes(digest) ?? false)
  if (byAlias !== -1) return byAlias
  const byContent = versions.findLastIndex((version) => contentDigest(version.val) === digest)
  return byContent === -1 ? null : byContent
}

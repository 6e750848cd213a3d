/** The object read request of interface.md. */
import { Type } from 'typebox'
import { nullable } from './json-schema.js'

const Id = Type.String({ minLength: 1 })

export const ObjectReadRequest = Type.Object({
  project_id: Id,
  object_id: Id,
  digest: Id,
  metadata_only: Type.Optional(nullable(Type.Boolean())),
  include_tags_and_aliases: Type.Optional(nullable(Type.Boolean())),
})

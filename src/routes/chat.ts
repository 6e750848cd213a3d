/** `POST /v1/chat/completions`: validate, normalize, forward. */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { GatewayContext } from '../context.js'
import { requireAuth } from '../auth/require-auth.js'
import { GatewayError } from '../errors/gateway-error.js'
import { compileBodyCheck } from '../schemas/body-validator.js'
import { ChatCompletionRequest, type ChatCompletionBody } from '../schemas/chat.js'
import { findRuleViolation } from '../schemas/chat-rules.js'
import { findWideIntegerViolation } from '../schemas/wide-integer-bounds.js'
import { injectedStreamOptions, normalizedMembers } from '../schemas/normalize-chat.js'
import { streamOptionsRewrite } from '../proxy/stream-options-text.js'
import { admitKey } from '../scheduling/key-policy.js'
import { affinityKey } from '../routing/balancers/prefix-affinity.js'
import { chooseRequestId, REQUEST_ID_RULE } from '../schemas/request-id.js'
import type { ModelRoute } from '../routing/model-route.js'
import { forwardChat, unlessCutOff } from '../proxy/chat-forward.js'
import { upstreamChatBody } from '../proxy/chat-upstream-body.js'
import { ClientDeparture, responseClosed } from '../proxy/client-departure.js'
import { markCutOffable } from '../proxy/in-flight-requests.js'

const checkChatBody = compileBodyCheck(ChatCompletionRequest)

export function registerChatRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  app.post('/v1/chat/completions', {
    config: { family: 'chat' },
    onRequest: requireAuth(ctx.authenticators, { scheme: 'bearer', scope: 'chat' }, ctx.config.server.body_limit_bytes),
    handler: (request, reply) => handleChat(ctx, request, reply),
  })
}

/** The error code of each kind of rule violation (chat-rules.ts); one without a kind is two members in conflict. */
const VIOLATION_CODES = { missing: 'missing_field', invalid: 'invalid_value', conflict: 'conflicting_fields' } as const

async function handleChat(ctx: GatewayContext, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const body = checkChatBody(request.body) as ChatCompletionBody
  const wide = findWideIntegerViolation(request.rawBody, body)
  if (wide) throw new GatewayError('invalid_value', `${wide.param} ${wide.message}.`, { param: wide.param })
  const route = resolveModel(ctx, body.model)
  request.facts.model = route.name

  const violation = findRuleViolation(body, route.settings)
  if (violation) {
    throw new GatewayError(VIOLATION_CODES[violation.kind ?? 'conflict'], `${violation.param} ${violation.message}.`, { param: violation.param })
  }

  const requestId = resolveRequestId(request, body)
  request.facts.requestId = requestId
  reply.header('x-request-id', requestId)
  const members = normalizedMembers(body, route.settings.served_name, requestId)
  const streamOptions = injectedStreamOptions(body)
  if (streamOptions !== null) members.stream_options = body.stream_options === undefined ? streamOptions : streamOptionsRewrite(streamOptions)
  const payload = upstreamChatBody(request.rawBody, body, members)
  const priority = body.priority ?? 0
  const affinity = route.settings.balance === 'prefix_affinity' ? affinityKey(body) : null
  // Watched before the first await: a key check in Redis is a round trip, and
  // a client that left during it was once still forwarded, its stream never
  // settled, and its slot leased for good.
  const client = departureOf(reply)
  const ticket = await admitKey(ctx.state, ctx.metrics, request.facts.principal, priority)
  if (client.aborted) {
    ticket.release()
    return unlessCutOff(reply, client)
  }
  return forwardChat(ctx, request, reply, { route, payload, bodyBytes: request.rawBody?.length ?? 0, messages: body.messages, requestId, priority, stream: body.stream === true, stripInjectedUsage: streamOptions !== null, ticket, affinityKey: affinity, client })
}

/**
 * Departs when the response closes before it finished: the client went away
 * (already, or later). A shutdown may cut it off through its response.
 */
function departureOf(reply: FastifyReply): ClientDeparture {
  const client = new ClientDeparture()
  const res = reply.raw
  if (responseClosed(res)) client.depart()
  else {
    markCutOffable(res, client)
    res.on('close', () => {
      if (!res.writableFinished) client.depart()
    })
  }
  return client
}

function resolveModel(ctx: GatewayContext, requested: string | null | undefined): ModelRoute {
  const name = requested ?? ctx.config.default_model
  const route = ctx.models.get(name)
  if (route !== undefined) return route
  const shown = name.length > 100 ? `${name.slice(0, 100)}…` : name
  const known = [...ctx.models.keys()].join(', ')
  throw new GatewayError('model_not_found', `Model "${shown}" is not served here. Known models: ${known}.`, { param: 'model' })
}

function resolveRequestId(request: FastifyRequest, body: ChatCompletionBody): string {
  const header = request.headers['x-request-id']
  // Reached only without a usable header, when app.ts's genReqId has already made a fresh id: reuse it.
  const choice = chooseRequestId(typeof header === 'string' ? header : header?.join(','), body.request_id, () => request.id)
  if (choice.ok) return choice.id
  if (choice.source === 'header') throw new GatewayError('invalid_request_id', `The X-Request-Id header ${REQUEST_ID_RULE}.`)
  throw new GatewayError('invalid_request_id', `request_id ${REQUEST_ID_RULE}.`, { param: 'request_id' })
}

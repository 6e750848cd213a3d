/**
 * The training job request of interface.md. Listed members are checked for
 * type; unknown members pass through (the upstream evolves faster than we do),
 * and which trajectory members are required is not stated, so none is.
 */
import { Type } from 'typebox'

const UUID = Type.String({
  pattern: '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$',
  description: 'a UUID (8-4-4-4-12 hex digits)',
})

const TrajectoryTool = Type.Object({
  type: Type.Optional(Type.String()),
  function: Type.Optional(
    Type.Object({
      name: Type.Optional(Type.String()),
      description: Type.Optional(Type.String()),
      parameters: Type.Optional(Type.Object({})),
      strict: Type.Optional(Type.Boolean()),
    }),
  ),
})

export const Trajectory = Type.Object({
  messages_and_choices: Type.Optional(Type.Array(Type.Unknown())),
  tools: Type.Optional(Type.Array(TrajectoryTool)),
  additional_histories: Type.Optional(Type.Array(Type.Unknown())),
  reward: Type.Optional(Type.Number()),
  initial_policy_version: Type.Optional(Type.Integer()),
  final_policy_version: Type.Optional(Type.Integer()),
  metrics: Type.Optional(Type.Object({})),
  metadata: Type.Optional(Type.Object({})),
  logs: Type.Optional(Type.Array(Type.Unknown())),
  start_time: Type.Optional(Type.String({ format: 'iso-date-time' })),
})

export const ExperimentalConfig = Type.Object({
  advantage_balance: Type.Optional(Type.Number()),
  epsilon: Type.Optional(Type.Number()),
  epsilon_high: Type.Optional(Type.Number()),
  policy_k2_tau: Type.Optional(Type.Number()),
  learning_rate: Type.Optional(Type.Number()),
  mask_prob_ratio: Type.Optional(Type.Boolean()),
  max_negative_advantage_importance_sampling_weight: Type.Optional(Type.Number()),
  ppo: Type.Optional(Type.Boolean()),
  precalculate_logprobs: Type.Optional(Type.Boolean()),
  scale_rewards: Type.Optional(Type.Boolean()),
})

export const TrainingJobRequest = Type.Object({
  model_id: UUID,
  trajectory_groups: Type.Array(Type.Object({ trajectories: Type.Array(Trajectory) })),
  experimental_config: Type.Optional(ExperimentalConfig),
})

/** A whole, well-formed non-streaming completion for model "served-m", as raw backends in fault tests answer when told to behave. */
export const GOOD_COMPLETION = JSON.stringify({
  id: 'chatcmpl-good',
  object: 'chat.completion',
  created: 1,
  model: 'served-m',
  choices: [{ index: 0, message: { role: 'assistant', content: 'fine' }, logprobs: null, finish_reason: 'stop' }],
  usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
})

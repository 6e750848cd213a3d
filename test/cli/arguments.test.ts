import { describe, expect, it } from 'vitest'
import { parseArguments, UsageError } from '../../src/cli/arguments.js'

describe('parseArguments', () => {
  it('serves by default, with the config from --config or SLUICE_CONFIG', () => {
    expect(parseArguments([], { SLUICE_CONFIG: 'env.yaml' })).toEqual({ command: 'serve', configFile: 'env.yaml' })
    expect(parseArguments(['check', '--config', 'a.yaml'], { SLUICE_CONFIG: 'env.yaml' })).toEqual({ command: 'check', configFile: 'a.yaml' })
    expect(parseArguments(['serve', '--config=b.yaml'], {})).toEqual({ command: 'serve', configFile: 'b.yaml' })
    // Session 23 lifecycle review: an empty one was read as the file name "".
    expect(parseArguments(['check'], { SLUICE_CONFIG: '' })).toEqual({ command: 'check', configFile: undefined })
  })

  // Regression (docs review): `check serve --config F` started the gateway (the last command won).
  it.each([['check', 'serve'], ['serve', 'check'], ['check', 'check']])('refuses two commands (%s %s) as a usage error', (first, second) => {
    expect(() => parseArguments([first, second, '--config', 'f.yaml'], {})).toThrow(UsageError)
  })

  it('--help wins wherever it stands', () => {
    expect(parseArguments(['check', '--help'], {}).command).toBe('help')
    expect(parseArguments(['-h', 'serve'], {}).command).toBe('help')
  })

  it('refuses an unknown argument and a --config without a file', () => {
    expect(() => parseArguments(['--bogus'], {})).toThrow(UsageError)
    expect(() => parseArguments(['--config'], {})).toThrow(UsageError)
  })
})

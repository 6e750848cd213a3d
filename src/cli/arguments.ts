/** Command-line parsing for `node dist/main.js [serve|check|hash-password|hash-token] [--config FILE]`. */

export type Command = 'serve' | 'check' | 'hash-password' | 'hash-token' | 'help'

export const USAGE = `usage: sluice [serve|check] [--config FILE]   (FILE defaults to $SLUICE_CONFIG, then config/gateway.yaml)
       sluice hash-token < token             prints token_sha256 for auth.keys
       sluice hash-password < password       prints password_scrypt for auth.users
       sluice --help`

/** A command line that cannot be run: said in one line with the usage, exit code 2. */
export class UsageError extends Error {
  constructor(problem: string) {
    super(`${problem}\n${USAGE}`)
    this.name = 'UsageError'
  }
}

export interface CliArguments {
  readonly command: Command
  readonly configFile: string | undefined
}

const COMMANDS: readonly Command[] = ['serve', 'check', 'hash-password', 'hash-token']

export function parseArguments(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): CliArguments {
  let command: Command | null = null
  let help = false
  // Set but empty (`SLUICE_CONFIG= sluice check`) is unset, as shells and compose files write it.
  let configFile = env.SLUICE_CONFIG === '' ? undefined : env.SLUICE_CONFIG
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === '--help' || arg === '-h') {
      help = true
    } else if (arg === '--config' || arg === '-c') {
      configFile = argv[++i]
      if (configFile === undefined) throw new UsageError('--config needs a file name')
    } else if (arg.startsWith('--config=')) {
      configFile = arg.slice('--config='.length)
    } else if ((COMMANDS as readonly string[]).includes(arg)) {
      // `check serve` once started the gateway: the last command named won.
      if (command !== null) throw new UsageError(`one command at a time, not "${command}" and "${arg}"`)
      command = arg as Command
    } else {
      throw new UsageError(`unknown argument "${arg}"`)
    }
  }
  return { command: help ? 'help' : (command ?? 'serve'), configFile }
}

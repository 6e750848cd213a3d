/** Command-line parsing for `node dist/main.js [serve|check|hash-password|hash-token] [--config FILE]`. */

export type Command = 'serve' | 'check' | 'hash-password' | 'hash-token'

export interface CliArguments {
  readonly command: Command
  readonly configFile: string | undefined
}

const COMMANDS: readonly Command[] = ['serve', 'check', 'hash-password', 'hash-token']

export function parseArguments(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): CliArguments {
  let command: Command = 'serve'
  let configFile = env.SLUICE_CONFIG
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === '--config' || arg === '-c') {
      configFile = argv[++i]
      if (configFile === undefined) throw new Error('--config needs a file name')
    } else if (arg.startsWith('--config=')) {
      configFile = arg.slice('--config='.length)
    } else if ((COMMANDS as readonly string[]).includes(arg)) {
      command = arg as Command
    } else {
      throw new Error(`unknown argument "${arg}" (usage: sluice [serve|check] --config FILE, or sluice hash-password|hash-token < secret)`)
    }
  }
  return { command, configFile }
}

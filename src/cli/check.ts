/** `sluice check --config FILE`: every problem as `path.to.key: message`, exit 1; or "ok", exit 0. */
import { readConfigText } from '../config/config-text.js'
import { parseConfig } from '../config/load.js'
import type { Environment } from '../config/interpolate.js'
import { formatIssue } from '../schemas/validation-issue.js'
import { configWarnings } from '../config/config-warnings.js'

export async function runCheck(file: string, env: Environment): Promise<number> {
  const read = await readConfigText(file)
  if ('problem' in read) {
    // The same shape as every other problem (and as a reload of a missing file logs it): scripts read stdout.
    console.error(`${file}: invalid configuration, 1 problem(s):`)
    console.log(formatIssue({ path: '', message: read.problem }))
    return 1
  }
  const result = parseConfig(read.text, env)
  if (result.ok) {
    console.log(`${file}: ok (${result.config.models.length} model(s), ${result.config.auth.keys.length} key(s))`)
    for (const warning of configWarnings(result.config)) console.log(`warning: ${warning}`)
    return 0
  }
  // Which file, on stderr: stdout stays one `path: message` per line for scripts (an operator audit
  // checking several files could not tell whose problems these were).
  console.error(`${file}: invalid configuration, ${result.issues.length} problem(s):`)
  for (const issue of result.issues) console.log(formatIssue(issue))
  return 1
}

/**
 * Preloaded into a gateway child process by the security tests
 * (`NODE_OPTIONS=--import=…`): SIGUSR2 runs a full garbage collection, so a
 * test can read the child's resident memory at a comparable point instead
 * of whenever V8 last happened to collect. Adds nothing else.
 */
import v8 from 'node:v8'
import vm from 'node:vm'

v8.setFlagsFromString('--expose-gc')
const collect = vm.runInNewContext('gc')
process.on('SIGUSR2', () => collect())

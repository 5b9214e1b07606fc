// For bench/users-path-ab.ts: a CPU profile of a server's load phase only (--cpu-prof is not allowed in
// NODE_OPTIONS): it starts on SIGUSR2 and is written to $PROF_DIR when the process exits.
import inspector from 'node:inspector';
import fs from 'node:fs';
const dir = process.env.PROF_DIR;
if (dir && !process.env.PROF_TAKEN) {
  process.env.PROF_TAKEN = '1';
  const s = new inspector.Session();
  s.connect();
  s.post('Profiler.enable');
  s.post('Profiler.setSamplingInterval', { interval: 200 });
  let on = false;
  process.on('SIGUSR2', () => { if (!on) { on = true; s.post('Profiler.start'); } });
  process.on('exit', () => {
    if (!on) return;
    s.post('Profiler.stop', (err, r) => {
      if (!err) { fs.mkdirSync(dir, { recursive: true }); fs.writeFileSync(`${dir}/${process.pid}.cpuprofile`, JSON.stringify(r.profile)); }
    });
  });
}

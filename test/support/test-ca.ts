/**
 * Test certificate authorities made with openssl (P-256), as a carrier or an office would make
 * them: a self-signed CA and server certificates it issues for given subjectAltNames.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export interface TestCa {
  /** PEM of the CA certificate. */
  ca: string;
  /** A server certificate for `san` (e.g. `DNS:trunk.test,IP:127.0.0.1`) and its key, PEM. */
  issue(leaf: string, san: string): { cert: string; key: string };
}

export function makeCa(dir: string, name: string): TestCa {
  const cnf = path.join(dir, `${name}.cnf`);
  fs.writeFileSync(
    cnf,
    `[req]\ndistinguished_name=dn\nx509_extensions=v3\nprompt=no\n[dn]\nCN=${name}\n[v3]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign\n`,
  );
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  ssl('req', '-config', cnf, '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.pem`);
  return {
    ca: fs.readFileSync(path.join(dir, `${name}.pem`), 'utf8'),
    issue: (leaf, san) => {
      ssl(
        'req',
        '-config',
        cnf,
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        `${leaf}.key`,
        '-out',
        `${leaf}.csr`,
        '-subj',
        `/CN=${leaf}`,
      );
      fs.writeFileSync(path.join(dir, `${leaf}.ext`), `subjectAltName=${san}\nextendedKeyUsage=serverAuth\n`);
      ssl(
        'x509',
        '-req',
        '-in',
        `${leaf}.csr`,
        '-CA',
        `${name}.pem`,
        '-CAkey',
        `${name}.key`,
        '-CAcreateserial',
        '-out',
        `${leaf}.pem`,
        '-days',
        '2',
        '-extfile',
        `${leaf}.ext`,
      );
      return { cert: fs.readFileSync(path.join(dir, `${leaf}.pem`), 'utf8'), key: fs.readFileSync(path.join(dir, `${leaf}.key`), 'utf8') };
    },
  };
}

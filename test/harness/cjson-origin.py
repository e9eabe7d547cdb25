# A JSON-RPC, MCP and GraphQL origin that reads its bodies with cJSON (Debian's libcjson1, through ctypes), as C
# servers do: cJSON keeps every repeated key and cJSON_GetObjectItemCaseSensitive returns the first one. For each
# POST it prints one line `RAN {"path","method","tool","query"}` with what it read, then answers. Prints
# `PORT <n>` once listening on 127.0.0.1 (TLS when --cert and --key are given).
import ctypes
import json
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

cjson = ctypes.CDLL('libcjson.so.1')
cjson.cJSON_Parse.restype = ctypes.c_void_p
cjson.cJSON_Parse.argtypes = [ctypes.c_char_p]
cjson.cJSON_GetObjectItemCaseSensitive.restype = ctypes.c_void_p
cjson.cJSON_GetObjectItemCaseSensitive.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
cjson.cJSON_GetStringValue.restype = ctypes.c_char_p
cjson.cJSON_GetStringValue.argtypes = [ctypes.c_void_p]
cjson.cJSON_Delete.argtypes = [ctypes.c_void_p]


def string_at(item, *path):
    """The string at `path` (first key wins at each step), or None."""
    for key in path:
        if not item:
            return None
        item = cjson.cJSON_GetObjectItemCaseSensitive(item, key.encode())
    value = cjson.cJSON_GetStringValue(item) if item else None
    return value.decode() if value is not None else None


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def setup(self):
        # The TLS handshake runs in this connection's thread: a peer that connects and waits blocks no other.
        if isinstance(self.request, ssl.SSLSocket):
            self.request.do_handshake()
        super().setup()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get('content-length', '0')))
        root = cjson.cJSON_Parse(body)
        try:
            ran = {
                'path': self.path,
                'method': string_at(root, 'method'),
                'tool': string_at(root, 'params', 'name'),
                'query': string_at(root, 'query'),
            }
        finally:
            if root:
                cjson.cJSON_Delete(root)
        print('RAN ' + json.dumps(ran), flush=True)
        answer = json.dumps({'jsonrpc': '2.0', 'id': 1, 'result': ran}).encode()
        self.send_response(200)
        self.send_header('content-type', 'application/json')
        self.send_header('content-length', str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


class TlsServer(ThreadingHTTPServer):
    def get_request(self):
        sock, address = self.socket.accept()
        return self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address


if len(sys.argv) == 5 and sys.argv[1] == '--cert' and sys.argv[3] == '--key':
    server = TlsServer(('127.0.0.1', 0), Handler)
    server.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.context.load_cert_chain(sys.argv[2], sys.argv[4])
else:
    server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
server.daemon_threads = True
print('PORT %d' % server.server_address[1], flush=True)
server.serve_forever()
